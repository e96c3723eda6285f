// SLC -> DLC on the O0 sum embedding bag (tests/dae_target/slc_examples.py): three TUs
// nested b > j > k, the offsets streams as the bounds of j, the id stream ids[j] chained into
// the row stream table[ids[j], k]; the row-zeroing callback at the begin of TU j with the bag
// index, the per-element callback at each iteration of TU k with (b, k, value). The whole
// output is checked line by line: nothing else changes (the to_stream ops stay on the core).
// RUN: ember-xla opt %s --pipeline=decouple > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir --match-full-lines

// CHECK:      module @bag attributes {entry = @bag} {
// CHECK-NEXT:   func @bag(%arg0: memref<?xindex>, %arg1: memref<?xi32>, %arg2: memref<?x?xf32>, %arg3: memref<?x?xf32>) attributes {num_inputs = 3} {
// CHECK-NEXT:     %0 = "arith.constant"() {value = 0} : () -> index
// CHECK-NEXT:     %1 = "arith.constant"() {value = 1} : () -> index
// CHECK-NEXT:     %2 = "memref.dim"(%arg0) {dim = 0} : (memref<?xindex>) -> index
// CHECK-NEXT:     %3 = "arith.subi"(%2, %1) : (index, index) -> index
// CHECK-NEXT:     %4 = "memref.dim"(%arg2) {dim = 1} : (memref<?x?xf32>) -> index
// CHECK-NEXT:     %5 = "slc.to_stream"(%0) : (index) -> !slc.stream<index>
// CHECK-NEXT:     %6 = "slc.to_stream"(%1) : (index) -> !slc.stream<index>
// CHECK-NEXT:     %7 = "slc.to_stream"(%3) : (index) -> !slc.stream<index>
// CHECK-NEXT:     %8 = "slc.to_stream"(%4) : (index) -> !slc.stream<index>
// CHECK-NEXT:     "dlc.configure_access_engine"() ({
// CHECK-NEXT:       %9 = "dlc.new_tu"(%5, %7, %6) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> !dlc.tu
// CHECK-NEXT:       %10 = "dlc.get_ind_var"(%9) : (!dlc.tu) -> !slc.stream<index>
// CHECK-NEXT:       %11 = "slc.mem_stream"(%arg0, %10) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
// CHECK-NEXT:       %12 = "slc.alu_stream"(%10, %6) {op = "add"} : (!slc.stream<index>, !slc.stream<index>) -> !slc.stream<index>
// CHECK-NEXT:       %13 = "slc.mem_stream"(%arg0, %12) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
// CHECK-NEXT:       %14 = "dlc.new_tu"(%9, %11, %13, %6) : (!dlc.tu, !slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> !dlc.tu
// CHECK-NEXT:       %15 = "dlc.get_ind_var"(%14) : (!dlc.tu) -> !slc.stream<index>
// CHECK-NEXT:       "dlc.register_operand"(%14, %10) {event = "begin"} : (!dlc.tu, !slc.stream<index>) -> ()
// CHECK-NEXT:       "dlc.register_callback"(%14) {event = "begin", id = 0} : (!dlc.tu) -> ()
// CHECK-NEXT:       %16 = "slc.mem_stream"(%arg1, %15) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
// CHECK-NEXT:       %17 = "dlc.new_tu"(%14, %5, %8, %6) : (!dlc.tu, !slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> !dlc.tu
// CHECK-NEXT:       %18 = "dlc.get_ind_var"(%17) : (!dlc.tu) -> !slc.stream<index>
// CHECK-NEXT:       %19 = "slc.mem_stream"(%arg2, %16, %18) : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<index>) -> !slc.stream<f32>
// CHECK-NEXT:       "dlc.register_operand"(%17, %10) {event = "iter"} : (!dlc.tu, !slc.stream<index>) -> ()
// CHECK-NEXT:       "dlc.register_operand"(%17, %18) {event = "iter"} : (!dlc.tu, !slc.stream<index>) -> ()
// CHECK-NEXT:       "dlc.register_operand"(%17, %19) {event = "iter"} : (!dlc.tu, !slc.stream<f32>) -> ()
// CHECK-NEXT:       "dlc.register_callback"(%17) {event = "iter", id = 1} : (!dlc.tu) -> ()
// CHECK-NEXT:     }) : () -> ()
// CHECK-NEXT:     "dlc.compute_loop"() ({
// CHECK-NEXT:       %20 = "dlc.pop_operand"() : () -> index
// CHECK-NEXT:       "scf.for"(%0, %4, %1) ({
// CHECK-NEXT:       ^bb0(%i: index):
// CHECK-NEXT:         %21 = "arith.constant"() {value = 0.0} : () -> f32
// CHECK-NEXT:         "memref.store"(%21, %arg3, %20, %i) : (f32, memref<?x?xf32>, index, index) -> ()
// CHECK-NEXT:         "scf.yield"() : () -> ()
// CHECK-NEXT:       }) : (index, index, index) -> ()
// CHECK-NEXT:       "dlc.yield"() : () -> ()
// CHECK-NEXT:     }, {
// CHECK-NEXT:       %22 = "dlc.pop_operand"() : () -> index
// CHECK-NEXT:       %23 = "dlc.pop_operand"() : () -> index
// CHECK-NEXT:       %24 = "dlc.pop_operand"() : () -> f32
// CHECK-NEXT:       %25 = "memref.load"(%arg3, %22, %23) : (memref<?x?xf32>, index, index) -> f32
// CHECK-NEXT:       %26 = "arith.addf"(%25, %24) : (f32, f32) -> f32
// CHECK-NEXT:       "memref.store"(%26, %arg3, %22, %23) : (f32, memref<?x?xf32>, index, index) -> ()
// CHECK-NEXT:       "dlc.yield"() : () -> ()
// CHECK-NEXT:     }) {cases = [0, 1], vars = []} : () -> ()
// CHECK-NEXT:     "func.return"() : () -> ()
// CHECK-NEXT:   }
// CHECK-NEXT: }

module @bag attributes {entry = @bag} {
  func @bag(%arg0: memref<?xindex>, %arg1: memref<?xi32>, %arg2: memref<?x?xf32>, %arg3: memref<?x?xf32>) attributes {num_inputs = 3} {
    %0 = "arith.constant"() {value = 0} : () -> index
    %1 = "arith.constant"() {value = 1} : () -> index
    %2 = "memref.dim"(%arg0) {dim = 0} : (memref<?xindex>) -> index
    %3 = "arith.subi"(%2, %1) : (index, index) -> index
    %4 = "memref.dim"(%arg2) {dim = 1} : (memref<?x?xf32>) -> index
    %5 = "slc.to_stream"(%0) : (index) -> !slc.stream<index>
    %6 = "slc.to_stream"(%1) : (index) -> !slc.stream<index>
    %7 = "slc.to_stream"(%3) : (index) -> !slc.stream<index>
    %8 = "slc.to_stream"(%4) : (index) -> !slc.stream<index>
    "slc.for"(%5, %7, %6) ({
    ^bb0(%b: !slc.stream<index>):
      "slc.callback"() ({
        %9 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
        "scf.for"(%0, %4, %1) ({
        ^bb0(%i: index):
          %10 = "arith.constant"() {value = 0.0} : () -> f32
          "memref.store"(%10, %arg3, %9, %i) : (f32, memref<?x?xf32>, index, index) -> ()
          "scf.yield"() : () -> ()
        }) : (index, index, index) -> ()
        "slc.yield"() : () -> ()
      }) : () -> ()
      %11 = "slc.mem_stream"(%arg0, %b) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
      %12 = "slc.alu_stream"(%b, %6) {op = "add"} : (!slc.stream<index>, !slc.stream<index>) -> !slc.stream<index>
      %13 = "slc.mem_stream"(%arg0, %12) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
      "slc.for"(%11, %13, %6) ({
      ^bb0(%j: !slc.stream<index>):
        %14 = "slc.mem_stream"(%arg1, %j) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
        "slc.for"(%5, %8, %6) ({
        ^bb0(%k: !slc.stream<index>):
          %15 = "slc.mem_stream"(%arg2, %14, %k) : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<index>) -> !slc.stream<f32>
          "slc.callback"() ({
            %16 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
            %17 = "slc.from_stream"(%k) : (!slc.stream<index>) -> index
            %18 = "slc.from_stream"(%15) : (!slc.stream<f32>) -> f32
            %19 = "memref.load"(%arg3, %16, %17) : (memref<?x?xf32>, index, index) -> f32
            %20 = "arith.addf"(%19, %18) : (f32, f32) -> f32
            "memref.store"(%20, %arg3, %16, %17) : (f32, memref<?x?xf32>, index, index) -> ()
            "slc.yield"() : () -> ()
          }) : () -> ()
          "slc.yield"() : () -> ()
        }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
        "slc.yield"() : () -> ()
      }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
      "slc.yield"() : () -> ()
    }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
    "func.return"() : () -> ()
  }
}

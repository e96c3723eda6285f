// The sum embedding bag (the O0 SLC of tests/dae_target/slc_examples.py) compiled at -O3
// (vectorize{vl=8}, bufferize, queue-align, simplify-mem, decouple): the shape of Ember's
// tests/eb_dlc.mlir. Three TUs (bags > lookups > an 8-lane row TU), the id stream chained into
// the contiguous row stream, the row buffer pushed at the end of the row TU with its token, and
// the output row a core variable (get_var / increment_var): no queue entry carries the bag index;
// the begin-of-bag case zeroes the row with masked vector stores (no scalar store left).
// RUN: ember-xla opt %s -O3 > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir

// CHECK:      "dlc.configure_access_engine"() ({
// CHECK-NEXT:   %[[TB:[0-9]+]] = "dlc.new_tu"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) :
// CHECK-NEXT:   %[[B:[0-9]+]] = "dlc.get_ind_var"(%[[TB]])
// CHECK-NEXT:   %[[LO:[0-9]+]] = "slc.mem_stream"(%arg0, %[[B]])
// CHECK-NEXT:   %[[B1:[0-9]+]] = "slc.alu_stream"(%[[B]], %{{[0-9]+}}) {op = "add"}
// CHECK-NEXT:   %[[HI:[0-9]+]] = "slc.mem_stream"(%arg0, %[[B1]])
// CHECK-NEXT:   %[[TJ:[0-9]+]] = "dlc.new_tu"(%[[TB]], %[[LO]], %[[HI]], %{{[0-9]+}})
// CHECK-NEXT:   %[[J:[0-9]+]] = "dlc.get_ind_var"(%[[TJ]])
// CHECK-NEXT:   "dlc.register_callback"(%[[TJ]]) {event = "begin", id = 0}
// CHECK-NEXT:   %[[I:[0-9]+]] = "slc.mem_stream"(%arg1, %[[J]])
// CHECK-NEXT:   %[[TK:[0-9]+]] = "dlc.new_tu"(%[[TJ]], {{.*}}) {vl = 8}
// CHECK-NEXT:   %[[K:[0-9]+]] = "dlc.get_ind_var"(%[[TK]]) : (!dlc.tu) -> !slc.stream<vector<8xindex>>
// CHECK-NEXT:   %[[M:[0-9]+]] = "dlc.get_mask"(%[[TK]])
// CHECK-NEXT:   %[[ROW:[0-9]+]] = "slcv.mem_stream"(%arg2, %[[I]], %[[K]], %[[M]]) {contiguous = true}
// CHECK-NEXT:   "dlc.register_operand"(%[[TK]], %[[ROW]]) {event = "end"}
// CHECK-NEXT:   "dlc.register_callback"(%[[TK]]) {event = "end", id = 1}
// CHECK-NEXT:   "dlc.register_callback"(%[[TJ]]) {event = "end", id = 2}
// CHECK-NEXT: }) : () -> ()
// CHECK-NEXT: "dlc.compute_loop"(%0) ({
// CHECK-NEXT:   "dlc.get_var"() {name = "row"} : () -> index
// CHECK-NOT:    "memref.store"
// CHECK:        "vector.maskedstore"(%arg3,
// CHECK:        "dlc.yield"() : () -> ()
// CHECK-NEXT: }, {
// CHECK-NEXT:   "dlc.pop_operand"() : () -> memref<?xf32>
// CHECK-NEXT:   "dlc.get_var"() {name = "row"} : () -> index
// CHECK-NOT:    "dlc.pop_operand"
// CHECK:        "slcv.from_buffer"
// CHECK:        "dlc.yield"() : () -> ()
// CHECK-NEXT: }, {
// CHECK-NEXT:   "dlc.increment_var"() {name = "row"} : () -> ()
// CHECK-NEXT:   "dlc.yield"() : () -> ()
// CHECK-NEXT: }) {cases = [0, 1, 2], vars = ["row"]} : (index) -> index

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

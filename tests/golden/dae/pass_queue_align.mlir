// queue-align on the O0 sum embedding bag: the bag loop carries %row (init 0), the reads of
// its induction variable in callbacks become %row, an end-of-iteration callback yields
// %row + 1 (Ember's eb_slc_O3.mlir). Checked line by line: nothing else changes.
// RUN: ember-xla opt %s --pipeline=queue-align > %t.mlir
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
// CHECK-NEXT:     %9 = "slc.for"(%5, %7, %6, %0) ({
// CHECK-NEXT:     ^bb0(%b: !slc.stream<index>, %row: index):
// CHECK-NEXT:       "slc.callback"() ({
// CHECK-NEXT:         "scf.for"(%0, %4, %1) ({
// CHECK-NEXT:         ^bb0(%i: index):
// CHECK-NEXT:           %10 = "arith.constant"() {value = 0.0} : () -> f32
// CHECK-NEXT:           "memref.store"(%10, %arg3, %row, %i) : (f32, memref<?x?xf32>, index, index) -> ()
// CHECK-NEXT:           "scf.yield"() : () -> ()
// CHECK-NEXT:         }) : (index, index, index) -> ()
// CHECK-NEXT:         "slc.yield"() : () -> ()
// CHECK-NEXT:       }) : () -> ()
// CHECK-NEXT:       %11 = "slc.mem_stream"(%arg0, %b) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
// CHECK-NEXT:       %12 = "slc.alu_stream"(%b, %6) {op = "add"} : (!slc.stream<index>, !slc.stream<index>) -> !slc.stream<index>
// CHECK-NEXT:       %13 = "slc.mem_stream"(%arg0, %12) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
// CHECK-NEXT:       "slc.for"(%11, %13, %6) ({
// CHECK-NEXT:       ^bb0(%j: !slc.stream<index>):
// CHECK-NEXT:         %14 = "slc.mem_stream"(%arg1, %j) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
// CHECK-NEXT:         "slc.for"(%5, %8, %6) ({
// CHECK-NEXT:         ^bb0(%k: !slc.stream<index>):
// CHECK-NEXT:           %15 = "slc.mem_stream"(%arg2, %14, %k) : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<index>) -> !slc.stream<f32>
// CHECK-NEXT:           "slc.callback"() ({
// CHECK-NEXT:             %16 = "slc.from_stream"(%k) : (!slc.stream<index>) -> index
// CHECK-NEXT:             %17 = "slc.from_stream"(%15) : (!slc.stream<f32>) -> f32
// CHECK-NEXT:             %18 = "memref.load"(%arg3, %row, %16) : (memref<?x?xf32>, index, index) -> f32
// CHECK-NEXT:             %19 = "arith.addf"(%18, %17) : (f32, f32) -> f32
// CHECK-NEXT:             "memref.store"(%19, %arg3, %row, %16) : (f32, memref<?x?xf32>, index, index) -> ()
// CHECK-NEXT:             "slc.yield"() : () -> ()
// CHECK-NEXT:           }) : () -> ()
// CHECK-NEXT:           "slc.yield"() : () -> ()
// CHECK-NEXT:         }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
// CHECK-NEXT:         "slc.yield"() : () -> ()
// CHECK-NEXT:       }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
// CHECK-NEXT:       %20 = "slc.callback"() ({
// CHECK-NEXT:         %21 = "arith.addi"(%row, %1) : (index, index) -> index
// CHECK-NEXT:         "slc.yield"(%21) : (index) -> ()
// CHECK-NEXT:       }) : () -> index
// CHECK-NEXT:       "slc.yield"(%20) : (index) -> ()
// CHECK-NEXT:     }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>, index) -> index
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

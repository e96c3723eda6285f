// hoist on the bufferized weighted bag: the row callback's loop-invariant core values (the
// output row, the weight and its broadcast, the zero passthru) move before its scf.for; the
// loop keeps only the per-chunk work.
// RUN: ember-xla opt %s --pipeline='hoist' > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir

// CHECK:      "slc.callback"() ({
// CHECK:        %[[W:[0-9]+]] = "slc.from_stream"(%15) : (!slc.stream<f32>) -> f32
// CHECK-NEXT:   %[[WV:[0-9]+]] = "vector.broadcast"(%[[W]])
// CHECK-NEXT:   %[[Z:[0-9]+]] = "arith.constant"() {value = 0.0} : () -> vector<4xf32>
// CHECK-NEXT:   "scf.for"(
// CHECK-NEXT:   ^bb0(%c: index):
// CHECK-NEXT:     "slcv.mask"(%c,
// CHECK-NEXT:     "slcv.from_buffer"(
// CHECK-NEXT:     "arith.mulf"({{%[0-9]+}}, %[[WV]])
// CHECK-NEXT:     "vector.maskedload"(%arg4, {{%[0-9]+}}, %c, {{%[0-9]+}}, %[[Z]])
// CHECK-NEXT:     "arith.addf"(
// CHECK-NEXT:     "vector.maskedstore"(
// CHECK-NEXT:     "scf.yield"() : () -> ()

module @bag attributes {entry = @bag} {
  func @bag(%arg0: memref<?xindex>, %arg1: memref<?xi32>, %arg2: memref<?x?xf32>, %arg3: memref<?xf32>, %arg4: memref<?x?xf32>) attributes {num_inputs = 4} {
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
          "memref.store"(%10, %arg4, %9, %i) : (f32, memref<?x?xf32>, index, index) -> ()
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
        %15 = "slc.mem_stream"(%arg3, %j) : (memref<?xf32>, !slc.stream<index>) -> !slc.stream<f32>
        %16 = "slcv.buf_stream"(%8) : (!slc.stream<index>) -> !slc.stream<memref<?xf32>>
        "slcv.for"(%5, %8, %6) ({
        ^bb0(%kv: !slc.stream<vector<4xindex>>, %mask: !slc.stream<vector<4xi1>>):
          %17 = "slcv.mem_stream"(%arg2, %14, %kv, %mask) : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<vector<4xindex>>, !slc.stream<vector<4xi1>>) -> !slc.stream<vector<4xf32>>
          "slcv.to_buffer"(%17, %16, %kv, %mask) : (!slc.stream<vector<4xf32>>, !slc.stream<memref<?xf32>>, !slc.stream<vector<4xindex>>, !slc.stream<vector<4xi1>>) -> ()
          "slcv.yield"() : () -> ()
        }) {vl = 4, config = "bcast"} : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
        "slc.callback"() ({
          %18 = "slc.from_stream"(%5) : (!slc.stream<index>) -> index
          %19 = "slc.from_stream"(%8) : (!slc.stream<index>) -> index
          %20 = "slc.from_stream"(%6) : (!slc.stream<index>) -> index
          %21 = "arith.constant"() {value = 4} : () -> index
          %22 = "arith.muli"(%20, %21) : (index, index) -> index
          %23 = "slc.from_stream"(%16) : (!slc.stream<memref<?xf32>>) -> memref<?xf32>
          "scf.for"(%18, %19, %22) ({
          ^bb0(%c: index):
            %24 = "slcv.mask"(%c, %18, %19, %20) : (index, index, index, index) -> vector<4xi1>
            %25 = "slcv.from_buffer"(%23, %c) : (memref<?xf32>, index) -> vector<4xf32>
            %26 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
            %27 = "slc.from_stream"(%15) : (!slc.stream<f32>) -> f32
            %28 = "vector.broadcast"(%27) : (f32) -> vector<4xf32>
            %29 = "arith.mulf"(%25, %28) : (vector<4xf32>, vector<4xf32>) -> vector<4xf32>
            %30 = "arith.constant"() {value = 0.0} : () -> vector<4xf32>
            %31 = "vector.maskedload"(%arg4, %26, %c, %24, %30) : (memref<?x?xf32>, index, index, vector<4xi1>, vector<4xf32>) -> vector<4xf32>
            %32 = "arith.addf"(%31, %29) : (vector<4xf32>, vector<4xf32>) -> vector<4xf32>
            "vector.maskedstore"(%arg4, %26, %c, %24, %32) : (memref<?x?xf32>, index, index, vector<4xi1>, vector<4xf32>) -> ()
            "scf.yield"() : () -> ()
          }) : (index, index, index) -> ()
          "slc.yield"() : () -> ()
        }) : () -> ()
        "slc.yield"() : () -> ()
      }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
      "slc.yield"() : () -> ()
    }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
    "func.return"() : () -> ()
  }
}

// bufferize on the vectorized bag: a row buffer (slcv.buf_stream of the row length %8)
// before the row loop, slcv.to_buffer in it instead of the per-chunk callback, and ONE
// callback after it that walks the row in chunks of 4 on the core (slcv.mask, from_buffer).
// RUN: ember-xla opt %s --pipeline='bufferize' > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir

// CHECK:          %[[BUF:[0-9]+]] = "slcv.buf_stream"(%8) : (!slc.stream<index>) -> !slc.stream<memref<?xf32>>
// CHECK-NEXT:     "slcv.for"(%5, %8, %6) ({
// CHECK-NEXT:     ^bb0(%kv: !slc.stream<vector<4xindex>>, %mask: !slc.stream<vector<4xi1>>):
// CHECK-NEXT:       %[[V:[0-9]+]] = "slcv.mem_stream"(%arg2, %14, %kv, %mask)
// CHECK-NEXT:       "slcv.to_buffer"(%[[V]], %[[BUF]], %kv, %mask)
// CHECK-NEXT:       "slcv.yield"() : () -> ()
// CHECK-NEXT:     }) {vl = 4, config = "bcast"}
// CHECK-NEXT:     "slc.callback"() ({
// CHECK:            %[[ROW:[0-9]+]] = "slc.from_stream"(%[[BUF]]) : (!slc.stream<memref<?xf32>>) -> memref<?xf32>
// CHECK-NEXT:       "scf.for"(
// CHECK-NEXT:       ^bb0(%c: index):
// CHECK-NEXT:         "slcv.mask"(%c,
// CHECK-NEXT:         "slcv.from_buffer"(%[[ROW]], %c)
// CHECK:              "vector.maskedstore"(%arg3, {{%[0-9]+}}, %c,
// CHECK-NOT:  "slcv.first_lane"

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
        "slcv.for"(%5, %8, %6) ({
        ^bb0(%kv: !slc.stream<vector<4xindex>>, %mask: !slc.stream<vector<4xi1>>):
          %15 = "slcv.mem_stream"(%arg2, %14, %kv, %mask) : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<vector<4xindex>>, !slc.stream<vector<4xi1>>) -> !slc.stream<vector<4xf32>>
          "slc.callback"() ({
            %16 = "slc.from_stream"(%kv) : (!slc.stream<vector<4xindex>>) -> vector<4xindex>
            %17 = "slcv.first_lane"(%16) : (vector<4xindex>) -> index
            %18 = "slc.from_stream"(%15) : (!slc.stream<vector<4xf32>>) -> vector<4xf32>
            %19 = "slc.from_stream"(%mask) : (!slc.stream<vector<4xi1>>) -> vector<4xi1>
            %20 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
            %21 = "arith.constant"() {value = 0.0} : () -> vector<4xf32>
            %22 = "vector.maskedload"(%arg3, %20, %17, %19, %21) : (memref<?x?xf32>, index, index, vector<4xi1>, vector<4xf32>) -> vector<4xf32>
            %23 = "arith.addf"(%22, %18) : (vector<4xf32>, vector<4xf32>) -> vector<4xf32>
            "vector.maskedstore"(%arg3, %20, %17, %19, %23) : (memref<?x?xf32>, index, index, vector<4xi1>, vector<4xf32>) -> ()
            "slc.yield"() : () -> ()
          }) : () -> ()
          "slcv.yield"() : () -> ()
        }) {vl = 4, config = "bcast"} : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
        "slc.yield"() : () -> ()
      }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
      "slc.yield"() : () -> ()
    }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
    "func.return"() : () -> ()
  }
}

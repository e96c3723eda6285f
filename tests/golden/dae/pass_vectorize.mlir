// vectorize{vl=4} on the O0 embedding bag (weighted sum, hand-built like Ember's
// eb_slc_O0): the innermost row loop becomes slcv.for<4> with a masked vector row stream
// (the row index broadcast: config bcast) and a lane-wise callback (maskedload/addf/
// maskedstore at the chunk's first lane under the tail mask); the begin-of-bag callback's
// fill loop (out[b, i] = 0.0) becomes a loop over chunks of 4: one masked vector store of a
// zero vector per chunk under the tail mask slcv.mask(i, 0, D, 1). The bag and lookup loops
// and their streams stay as they were.
// RUN: ember-xla opt %s --pipeline='vectorize{vl=4}' > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir

// CHECK:      "slc.for"(%5, %7, %6) ({
// CHECK-NEXT: ^bb0(%b: !slc.stream<index>):
// CHECK-NEXT:   "slc.callback"() ({
// CHECK-NEXT:     %[[ROW0:[0-9]+]] = "slc.from_stream"(%b)
// CHECK-NEXT:     %[[VL:[0-9]+]] = "arith.constant"() {value = 4} : () -> index
// CHECK-NEXT:     %[[ZERO:[0-9]+]] = "arith.constant"() {value = 0.0} : () -> vector<4xf32>
// CHECK-NEXT:     "scf.for"(%0, %4, %[[VL]]) ({
// CHECK-NEXT:     ^bb0(%i: index):
// CHECK-NEXT:       %[[M:[0-9]+]] = "slcv.mask"(%i, %0, %4, %1) : (index, index, index, index) -> vector<4xi1>
// CHECK-NEXT:       "vector.maskedstore"(%arg4, %[[ROW0]], %i, %[[M]], %[[ZERO]])
// CHECK-NEXT:       "scf.yield"() : () -> ()
// CHECK-NEXT:     }) : (index, index, index) -> ()
// CHECK-NEXT:     "slc.yield"() : () -> ()
// CHECK-NEXT:   }) : () -> ()
// CHECK:        "slc.for"(%{{[0-9]+}}, %{{[0-9]+}}, %6) ({
// CHECK-NEXT:   ^bb0(%j: !slc.stream<index>):
// CHECK-NEXT:     %[[IDS:[0-9]+]] = "slc.mem_stream"(%arg1, %j)
// CHECK-NEXT:     %{{[0-9]+}} = "slc.mem_stream"(%arg3, %j)
// CHECK-NEXT:     "slcv.for"(%5, %8, %6) ({
// CHECK-NEXT:     ^bb0(%kv: !slc.stream<vector<4xindex>>, %mask: !slc.stream<vector<4xi1>>):
// CHECK-NEXT:       %{{[0-9]+}} = "slcv.mem_stream"(%arg2, %[[IDS]], %kv, %mask) : {{.*}} -> !slc.stream<vector<4xf32>>
// CHECK-NEXT:       "slc.callback"() ({
// CHECK-NEXT:         %[[KV:[0-9]+]] = "slc.from_stream"(%kv)
// CHECK-NEXT:         %[[FIRST:[0-9]+]] = "slcv.first_lane"(%[[KV]])
// CHECK:              "vector.maskedload"(%arg4, {{%[0-9]+}}, %[[FIRST]],
// CHECK:              "arith.addf"({{.*}} : (vector<4xf32>, vector<4xf32>) -> vector<4xf32>
// CHECK-NEXT:         "vector.maskedstore"(%arg4, {{%[0-9]+}}, %[[FIRST]],
// CHECK-NEXT:         "slc.yield"() : () -> ()
// CHECK-NEXT:       }) : () -> ()
// CHECK-NEXT:       "slcv.yield"() : () -> ()
// CHECK-NEXT:     }) {vl = 4, config = "bcast"}
// CHECK-NOT:  "slc.for"
// CHECK-NOT:  "memref.load"(%arg4
// CHECK-NOT:  "memref.store"

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
        "slc.for"(%5, %8, %6) ({
        ^bb0(%k: !slc.stream<index>):
          %16 = "slc.mem_stream"(%arg2, %14, %k) : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<index>) -> !slc.stream<f32>
          "slc.callback"() ({
            %17 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
            %18 = "slc.from_stream"(%k) : (!slc.stream<index>) -> index
            %19 = "slc.from_stream"(%16) : (!slc.stream<f32>) -> f32
            %20 = "slc.from_stream"(%15) : (!slc.stream<f32>) -> f32
            %21 = "arith.mulf"(%19, %20) : (f32, f32) -> f32
            %22 = "memref.load"(%arg4, %17, %18) : (memref<?x?xf32>, index, index) -> f32
            %23 = "arith.addf"(%22, %21) : (f32, f32) -> f32
            "memref.store"(%23, %arg4, %17, %18) : (f32, memref<?x?xf32>, index, index) -> ()
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

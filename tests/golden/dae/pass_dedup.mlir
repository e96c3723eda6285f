// dedup on the O0 bag whose row index is clamped: before the loop nest, slcv.unique sorts
// and uniques the ids, a fetch loop loads each distinct row once into a core buffer; the
// lookup loop then streams the slot of its id (inv[j]) and the per-element callback reads the
// fetched row instead of a row stream. The id stream and its clamp are gone from that loop.
// RUN: ember-xla opt %s --pipeline='dedup' > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir

// CHECK:      %[[U:[0-9]+]]:3 = "slcv.unique"(%arg1) : (memref<?xi32>) -> (memref<?xi32>, memref<?xindex>, !slc.stream<index>)
// CHECK:      %[[ROWS:[0-9]+]] = "memref.alloc"(
// CHECK:      "slc.for"({{%[0-9]+}}, %[[U]]#2, {{%[0-9]+}}) ({
// CHECK-NEXT: ^bb0(%u: !slc.stream<index>):
// CHECK-NEXT:   "slc.mem_stream"(%[[U]]#0, %u)
// CHECK-NEXT:   "slc.alu_stream"({{.*}}) {op = "clamp"}
// CHECK:          "memref.store"({{%[0-9]+}}, %[[ROWS]],
// CHECK:      ^bb0(%j: !slc.stream<index>):
// CHECK-NEXT:   %[[SLOT:[0-9]+]] = "slc.mem_stream"(%[[U]]#1, %j)
// CHECK-NOT:    "slc.alu_stream"
// CHECK:          %[[S:[0-9]+]] = "slc.from_stream"(%[[SLOT]])
// CHECK-NEXT:     %[[K:[0-9]+]] = "slc.from_stream"(%k_1)
// CHECK-NEXT:     "memref.load"(%[[ROWS]], %[[S]], %[[K]])

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
    %9 = "memref.dim"(%arg2) {dim = 0} : (memref<?x?xf32>) -> index
    %10 = "slc.to_stream"(%9) : (index) -> !slc.stream<index>
    "slc.for"(%5, %7, %6) ({
    ^bb0(%b: !slc.stream<index>):
      "slc.callback"() ({
        %11 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
        "scf.for"(%0, %4, %1) ({
        ^bb0(%i: index):
          %12 = "arith.constant"() {value = 0.0} : () -> f32
          "memref.store"(%12, %arg3, %11, %i) : (f32, memref<?x?xf32>, index, index) -> ()
          "scf.yield"() : () -> ()
        }) : (index, index, index) -> ()
        "slc.yield"() : () -> ()
      }) : () -> ()
      %13 = "slc.mem_stream"(%arg0, %b) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
      %14 = "slc.alu_stream"(%b, %6) {op = "add"} : (!slc.stream<index>, !slc.stream<index>) -> !slc.stream<index>
      %15 = "slc.mem_stream"(%arg0, %14) : (memref<?xindex>, !slc.stream<index>) -> !slc.stream<index>
      "slc.for"(%13, %15, %6) ({
      ^bb0(%j: !slc.stream<index>):
        %16 = "slc.mem_stream"(%arg1, %j) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
        %17 = "slc.alu_stream"(%16, %10) {op = "clamp"} : (!slc.stream<i32>, !slc.stream<index>) -> !slc.stream<i32>
        "slc.for"(%5, %8, %6) ({
        ^bb0(%k: !slc.stream<index>):
          %18 = "slc.mem_stream"(%arg2, %17, %k) : (memref<?x?xf32>, !slc.stream<i32>, !slc.stream<index>) -> !slc.stream<f32>
          "slc.callback"() ({
            %19 = "slc.from_stream"(%b) : (!slc.stream<index>) -> index
            %20 = "slc.from_stream"(%k) : (!slc.stream<index>) -> index
            %21 = "slc.from_stream"(%18) : (!slc.stream<f32>) -> f32
            %22 = "memref.load"(%arg3, %19, %20) : (memref<?x?xf32>, index, index) -> f32
            %23 = "arith.addf"(%22, %21) : (f32, f32) -> f32
            "memref.store"(%23, %arg3, %19, %20) : (f32, memref<?x?xf32>, index, index) -> ()
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

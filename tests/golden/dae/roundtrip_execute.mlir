// The generic text form of the execute-side dialects parses, verifies and prints back to
// the same text (a fixed point).
// RUN: ember-xla opt %s > %t.mlir
// RUN: ember-xla opt %t.mlir | diff %t.mlir -
// RUN: filecheck %s --input-file %t.mlir

// CHECK:      module @t attributes {entry = @f} {
// CHECK-NEXT:   func @f(%a: memref<?xf32>, %out: memref<?xf32>) {
// CHECK-NEXT:     %c0 = "arith.constant"() {value = 0} : () -> index
// CHECK-NEXT:     %x = "memref.load"(%a, %c0) : (memref<?xf32>, index) -> f32
// CHECK-NEXT:     "memref.store"(%x, %out, %c0) : (f32, memref<?xf32>, index) -> ()
// CHECK-NEXT:     "func.return"() : () -> ()
module @t attributes {entry = @f} {
  func @f(%a: memref<?xf32>, %out: memref<?xf32>) {
    %c0 = "arith.constant"() {value = 0} : () -> index
    %x = "memref.load"(%a, %c0) : (memref<?xf32>, index) -> f32
    "memref.store"(%x, %out, %c0) : (f32, memref<?xf32>, index) -> ()
    "func.return"() : () -> ()
  }
}

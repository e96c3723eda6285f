// The backward of a bag lookup fused with its SGD update (ember.sparse_sgd of a jax
// value_and_grad step, `table - 0.5 * grad`) at -O0, in three phases, each its own access
// engine and compute loop once decoupled.
// 1. zero the core scratch gradient %grad (memref.alloc [V, D]), one callback per row;
// 2. the scatter-add: the access unit streams j over the updates, the id indices[j] (the row
//    written), its in-range flag (ids outside [0, V) are dropped) and the gradient row's
//    elements updates[j, k]; the core's callback is an explicit read-modify-write
//    grad[id, k] = grad[id, k] + u under the flag. The core pops callbacks in stream order, so
//    a row's duplicate updates are added in index order (XLA's serial scatter);
// 3. one pass over the rows: out[r, :] = fma(grad[r, :], scale, table[r, :]) (XLA's contracted
//    t + g * s; a row without gradient gets fma(0, s, t)).
// Both printed levels parse back to the same text.
// RUN: rm -rf %t && ember-xla lower %S/Inputs/sgd_step.hlo -O0 --out %t
// RUN: filecheck %s --input-file %t/cluster0.slc.mlir
// RUN: filecheck %s --check-prefix=DLC --input-file %t/cluster0.dlc.mlir
// RUN: ember-xla opt %t/cluster0.slc.mlir | diff %t/cluster0.slc.mlir -
// RUN: ember-xla opt %t/cluster0.dlc.mlir | diff %t/cluster0.dlc.mlir -

// CHECK-LABEL: func @sparse_sgd(%table: memref<?x?xf32>, %indices: memref<?xi32>, %updates: memref<?x?xf32>, %scale: memref<f32>, %out: memref<?x?xf32>)
// CHECK:      %[[V:[0-9]+]] = "slc.to_stream"(%V)
// CHECK:      %grad = "memref.alloc"(%V, %D) : (index, index) -> memref<?x?xf32>
// CHECK:      "slc.for"(%{{[0-9]+}}, %[[V]], %{{[0-9]+}}) ({
// CHECK-NEXT: ^bb0(%r: !slc.stream<index>):
// CHECK:          "memref.store"(%{{[0-9]+}}, %grad, %{{[0-9]+}}, %i)
// CHECK:      "slc.for"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) ({
// CHECK-NEXT: ^bb0(%j: !slc.stream<index>):
// CHECK-NEXT:   %[[ID:[0-9]+]] = "slc.mem_stream"(%indices, %j)
// CHECK-NEXT:   %[[OK:[0-9]+]] = "slc.alu_stream"(%[[ID]], %[[V]]) {op = "inrange"}
// CHECK-NEXT:   "slc.for"
// CHECK-NEXT:   ^bb0(%k: !slc.stream<index>):
// CHECK-NEXT:     %[[U:[0-9]+]] = "slc.mem_stream"(%updates, %j, %k)
// CHECK-NEXT:     "slc.callback"() ({
// CHECK-NEXT:       %[[F:[0-9]+]] = "slc.from_stream"(%[[OK]])
// CHECK-NEXT:       "scf.if"(%[[F]]) ({
// CHECK-NEXT:         %[[R:[0-9]+]] = "slc.from_stream"(%[[ID]])
// CHECK-NEXT:         %[[C:[0-9]+]] = "slc.from_stream"(%k)
// CHECK-NEXT:         %[[OLD:[0-9]+]] = "memref.load"(%grad, %[[R]], %[[C]])
// CHECK-NEXT:         %[[X:[0-9]+]] = "slc.from_stream"(%[[U]])
// CHECK-NEXT:         %[[NEW:[0-9]+]] = "arith.addf"(%[[OLD]], %[[X]])
// CHECK-NEXT:         "memref.store"(%[[NEW]], %grad, %[[R]], %[[C]])
// CHECK:      ^bb0(%r_1: !slc.stream<index>):
// CHECK-NEXT:   "slc.callback"() ({
// CHECK-NEXT:     %[[S:[0-9]+]] = "memref.load"(%scale) : (memref<f32>) -> f32
// CHECK:            %[[G:[0-9]+]] = "memref.load"(%grad,
// CHECK-NEXT:       %[[T:[0-9]+]] = "memref.load"(%table,
// CHECK-NEXT:       %[[Y:[0-9]+]] = "arith.fma"(%[[G]], %[[S]], %[[T]]) : (f32, f32, f32) -> f32
// CHECK-NEXT:       "memref.store"(%[[Y]], %out,

// DLC:         "dlc.configure_access_engine"
// DLC:         "dlc.compute_loop"
// DLC:         "dlc.configure_access_engine"
// DLC:         "dlc.register_operand"(%[[TU:[0-9]+]], %{{[0-9]+}}) {event = "iter"} : (!dlc.tu, !slc.stream<i1>) -> ()
// DLC-NEXT:    "dlc.register_operand"(%[[TU]], %{{[0-9]+}}) {event = "iter"} : (!dlc.tu, !slc.stream<i32>) -> ()
// DLC-NEXT:    "dlc.register_operand"(%[[TU]], %{{[0-9]+}}) {event = "iter"} : (!dlc.tu, !slc.stream<index>) -> ()
// DLC-NEXT:    "dlc.register_operand"(%[[TU]], %{{[0-9]+}}) {event = "iter"} : (!dlc.tu, !slc.stream<f32>) -> ()
// DLC-NEXT:    "dlc.register_callback"(%[[TU]]) {event = "iter", id = 0}
// DLC:         "dlc.compute_loop"
// DLC-NEXT:      %[[F2:[0-9]+]] = "dlc.pop_operand"() : () -> i1
// DLC-NEXT:      %[[R2:[0-9]+]] = "dlc.pop_operand"() : () -> i32
// DLC-NEXT:      %[[K2:[0-9]+]] = "dlc.pop_operand"() : () -> index
// DLC-NEXT:      %[[U2:[0-9]+]] = "dlc.pop_operand"() : () -> f32
// DLC-NEXT:      "scf.if"(%[[F2]])
// DLC-NEXT:        %[[O2:[0-9]+]] = "memref.load"(%grad, %[[R2]], %[[K2]])
// DLC-NEXT:        %[[N2:[0-9]+]] = "arith.addf"(%[[O2]], %[[U2]])
// DLC-NEXT:        "memref.store"(%[[N2]], %grad, %[[R2]], %[[K2]])
// DLC:         "dlc.configure_access_engine"
// DLC:         "arith.fma"
// DLC-NOT:     "dlc.configure_access_engine"
// DLC:         "func.return"

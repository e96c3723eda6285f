// The backward of a bag lookup fused with its SGD update (ember.sparse_sgd of a jax
// value_and_grad step, `table - 0.5 * grad`) at -O0. The result starts as the table
// (`output_init = [0]`: updated in place) and only touched rows are read and written:
// - on the core, before the engines: n_dense = 0 when `t + 0 * s == t` for every t (s finite,
//   sign bit set: s - s == 0 and 1 / s < 0), else V (XLA's dense update changes untouched
//   rows); the two row passes over [0, n_dense) run only then;
// - per in-range id: zero its scratch gradient row, clear its done flag;
// - the scatter-add: the access unit streams j, the id indices[j] (the row written), its
//   in-range flag and the gradient row's elements updates[j, k]; the core's callback is an
//   explicit read-modify-write grad[id, k] = grad[id, k] + u under the flag, in stream order
//   (a row's duplicates in index order: XLA's serial scatter);
// - per in-range id, the first time its row comes up (done flag clear): set the flag,
//   out[id, :] = fma(grad[id, :], scale, table[id, :]) (XLA's contracted t + g * s): the
//   read-modify-write hazard of duplicate ids on the in-place table is the flag test;
// - [dense only] every row whose flag is clear: out[r, :] = fma(0, scale, table[r, :]).
// Each pass is its own access engine and compute loop once decoupled. Both printed levels
// parse back to the same text.
// RUN: rm -rf %t && ember-xla lower %S/Inputs/sgd_step.hlo -O0 --out %t
// RUN: filecheck %s --input-file %t/cluster1.slc.mlir
// RUN: filecheck %s --check-prefix=DLC --input-file %t/cluster1.dlc.mlir
// RUN: ember-xla opt %t/cluster1.slc.mlir | diff %t/cluster1.slc.mlir -
// RUN: ember-xla opt %t/cluster1.dlc.mlir | diff %t/cluster1.dlc.mlir -

// CHECK-LABEL: func @sparse_sgd(%table: memref<?x?xf32>, %indices: memref<?xi32>, %updates: memref<?x?xf32>, %scale: memref<f32>, %out: memref<?x?xf32>) attributes {kind = "sparse_sgd", num_inputs = 4, output_shapes = [[6, 4]], output_init = [0]}
// CHECK:      %[[V:[0-9]+]] = "slc.to_stream"(%V)
// CHECK:      %grad = "memref.alloc"(%V, %D) : (index, index) -> memref<?x?xf32>
// CHECK-NEXT: %done = "memref.alloc"(%V) : (index) -> memref<?xi1>
// CHECK-NEXT: %s = "memref.load"(%scale) : (memref<f32>) -> f32
// CHECK:      %[[DIFF:[0-9]+]] = "arith.subf"(%s, %s)
// CHECK-NEXT: %[[FIN:[0-9]+]] = "arith.cmpf"(%[[DIFF]], %{{[0-9]+}}) {pred = "oeq"}
// CHECK-NEXT: %[[INV:[0-9]+]] = "arith.divf"(%{{[0-9]+}}, %s)
// CHECK-NEXT: %[[NEG:[0-9]+]] = "arith.cmpf"(%[[INV]], %{{[0-9]+}}) {pred = "olt"}
// CHECK-NEXT: %[[EXACT:[0-9]+]] = "arith.andi"(%[[FIN]], %[[NEG]])
// CHECK-NEXT: %n_dense = "arith.select"(%[[EXACT]], %c0, %V) : (i1, index, index) -> index
// CHECK-NEXT: %[[ND:[0-9]+]] = "slc.to_stream"(%n_dense)
// CHECK:      "slc.for"(%{{[0-9]+}}, %[[ND]], %{{[0-9]+}}) ({
// CHECK:          "memref.store"(%{{[0-9]+}}, %done, %{{[0-9]+}}) : (i1, memref<?xi1>, index) -> ()
// CHECK:      ^bb0(%j: !slc.stream<index>):
// CHECK:              "memref.store"(%{{[0-9]+}}, %grad, %{{[0-9]+}}, %i)
// CHECK:            "memref.store"(%{{[0-9]+}}, %done, %{{[0-9]+}}) : (i1, memref<?xi1>, i32) -> ()
// CHECK:      ^bb0(%j_1: !slc.stream<index>):
// CHECK-NEXT:   %[[ID:[0-9]+]] = "slc.mem_stream"(%indices, %j_1)
// CHECK-NEXT:   %[[OK:[0-9]+]] = "slc.alu_stream"(%[[ID]], %[[V]]) {op = "inrange"}
// CHECK-NEXT:   "slc.for"
// CHECK-NEXT:   ^bb0(%k: !slc.stream<index>):
// CHECK-NEXT:     %[[U:[0-9]+]] = "slc.mem_stream"(%updates, %j_1, %k)
// CHECK-NEXT:     "slc.callback"() ({
// CHECK-NEXT:       %[[F:[0-9]+]] = "slc.from_stream"(%[[OK]])
// CHECK-NEXT:       "scf.if"(%[[F]]) ({
// CHECK-NEXT:         %[[R:[0-9]+]] = "slc.from_stream"(%[[ID]])
// CHECK-NEXT:         %[[C:[0-9]+]] = "slc.from_stream"(%k)
// CHECK-NEXT:         %[[OLD:[0-9]+]] = "memref.load"(%grad, %[[R]], %[[C]])
// CHECK-NEXT:         %[[X:[0-9]+]] = "slc.from_stream"(%[[U]])
// CHECK-NEXT:         %[[NEW:[0-9]+]] = "arith.addf"(%[[OLD]], %[[X]])
// CHECK-NEXT:         "memref.store"(%[[NEW]], %grad, %[[R]], %[[C]])
// CHECK:      ^bb0(%j_2: !slc.stream<index>):
// CHECK:            %[[R3:[0-9]+]] = "slc.from_stream"(%{{[0-9]+}}) : (!slc.stream<i32>) -> i32
// CHECK-NEXT:       %[[WAS:[0-9]+]] = "memref.load"(%done, %[[R3]])
// CHECK-NEXT:       %[[TRUE:[0-9]+]] = "arith.constant"() {value = true}
// CHECK-NEXT:       %[[FRESH:[0-9]+]] = "arith.xori"(%[[WAS]], %[[TRUE]])
// CHECK-NEXT:       "scf.if"(%[[FRESH]]) ({
// CHECK-NEXT:         "memref.store"(%{{[0-9]+}}, %done, %[[R3]])
// CHECK-NEXT:         %[[S:[0-9]+]] = "memref.load"(%scale) : (memref<f32>) -> f32
// CHECK-NEXT:         "scf.for"(%c0, %D, %c1) ({
// CHECK-NEXT:         ^bb0(%i_1: index):
// CHECK-NEXT:           %[[G:[0-9]+]] = "memref.load"(%grad, %[[R3]], %i_1)
// CHECK-NEXT:           %[[T:[0-9]+]] = "memref.load"(%table, %[[R3]], %i_1)
// CHECK-NEXT:           %[[Y:[0-9]+]] = "arith.fma"(%[[G]], %[[S]], %[[T]]) : (f32, f32, f32) -> f32
// CHECK-NEXT:           "memref.store"(%[[Y]], %out, %[[R3]], %i_1)
// CHECK:      "slc.for"(%{{[0-9]+}}, %[[ND]], %{{[0-9]+}}) ({
// CHECK:              "arith.fma"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (f32, f32, f32) -> f32
// CHECK:      "func.return"

// DLC:         "dlc.configure_access_engine"
// DLC:         "dlc.configure_access_engine"
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
// DLC:         "dlc.configure_access_engine"
// DLC:         "arith.fma"
// DLC-NOT:     "dlc.configure_access_engine"
// DLC:         "func.return"

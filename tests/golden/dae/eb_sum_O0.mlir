// The sum embedding bag (ember.offsets_bag: CSR offsets, as in Ember's tests/eb_slc_O0.mlir)
// at -O0. SLC: three loop levels (bags, the bag's lookups, the row's elements), the lookup
// loop's bounds are the offsets[b] / offsets[b+1] mem streams, the index mem stream is chained
// (through the clip clamp) into the row mem stream, one callback per element accumulates
// out[b, k]; a begin-of-bag callback writes the row's start value. Decoupled: three traversal
// units,
// the per-element callback is a token at the row TU's iter event with its three operands.
// Both printed levels parse back to the same text.
// RUN: rm -rf %t && ember-xla lower %S/Inputs/eb_sum.hlo -O0 --out %t
// RUN: filecheck %s --input-file %t/cluster0.slc.mlir
// RUN: filecheck %s --check-prefix=NOVEC --input-file %t/cluster0.slc.mlir
// RUN: filecheck %s --check-prefix=DLC --input-file %t/cluster0.dlc.mlir
// RUN: ember-xla opt %t/cluster0.slc.mlir | diff %t/cluster0.slc.mlir -
// RUN: ember-xla opt %t/cluster0.dlc.mlir | diff %t/cluster0.dlc.mlir -

// CHECK-LABEL: func @offsets_bag(%table: memref<?x?xf32>, %indices: memref<?xi32>, %offsets: memref<?xi32>, %out: memref<?x?xf32>)
// CHECK:      %[[ONE:[0-9]+]] = "slc.to_stream"(%c1)
// CHECK:      %[[DS:[0-9]+]] = "slc.to_stream"(%D)
// CHECK:      "slc.for"(%{{[0-9]+}}, %{{[0-9]+}}, %[[ONE]]) ({
// CHECK-NEXT: ^bb0(%b: !slc.stream<index>):
// CHECK-NEXT:   %[[LO:[0-9]+]] = "slc.mem_stream"(%offsets, %b)
// CHECK-NEXT:   %[[B1:[0-9]+]] = "slc.alu_stream"(%b, %[[ONE]]) {op = "add"}
// CHECK-NEXT:   %[[HI:[0-9]+]] = "slc.mem_stream"(%offsets, %[[B1]])
// CHECK-NEXT:   "slc.callback"() ({
// CHECK-NEXT:     %[[ROW0:[0-9]+]] = "slc.from_stream"(%b)
// CHECK:          "memref.store"(%{{[0-9]+}}, %out, %[[ROW0]], %i)
// CHECK:        %[[LOI:[0-9]+]] = "slc.alu_stream"(%[[LO]]) {op = "cast"}
// CHECK-NEXT:   %[[HII:[0-9]+]] = "slc.alu_stream"(%[[HI]]) {op = "cast"}
// CHECK-NEXT:   "slc.for"(%[[LOI]], %[[HII]], %[[ONE]]) ({
// CHECK-NEXT:   ^bb0(%j: !slc.stream<index>):
// CHECK-NEXT:     %[[IDX:[0-9]+]] = "slc.mem_stream"(%indices, %j) : (memref<?xi32>, !slc.stream<index>) -> !slc.stream<i32>
// CHECK-NEXT:     %[[ROW:[0-9]+]] = "slc.alu_stream"(%[[IDX]], %{{[0-9]+}}) {op = "clamp"}
// CHECK-NEXT:     "slc.for"(%{{[0-9]+}}, %[[DS]], %[[ONE]]) ({
// CHECK-NEXT:     ^bb0(%k: !slc.stream<index>):
// CHECK-NEXT:       %[[V:[0-9]+]] = "slc.mem_stream"(%table, %[[ROW]], %k) : (memref<?x?xf32>, !slc.stream<index>, !slc.stream<index>) -> !slc.stream<f32>
// CHECK-NEXT:       "slc.callback"() ({
// CHECK-NEXT:         %[[BB:[0-9]+]] = "slc.from_stream"(%b)
// CHECK-NEXT:         %[[KK:[0-9]+]] = "slc.from_stream"(%k)
// CHECK-NEXT:         %[[X:[0-9]+]] = "slc.from_stream"(%[[V]]) : (!slc.stream<f32>) -> f32
// CHECK-NEXT:         %[[ACC:[0-9]+]] = "memref.load"(%out, %[[BB]], %[[KK]])
// CHECK-NEXT:         %[[SUM:[0-9]+]] = "arith.addf"(%[[ACC]], %[[X]]) : (f32, f32) -> f32
// CHECK-NEXT:         "memref.store"(%[[SUM]], %out, %[[BB]], %[[KK]])
// CHECK-NEXT:         "slc.yield"() : () -> ()
// CHECK-NEXT:       }) : () -> ()
// CHECK-NEXT:       "slc.yield"() : () -> ()
// CHECK-NEXT:     }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
// CHECK-NEXT:     "slc.yield"() : () -> ()
// CHECK-NEXT:   }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
// CHECK-NEXT:   "slc.yield"() : () -> ()
// CHECK-NEXT: }) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> ()
// CHECK-NEXT: "func.return"() : () -> ()

// NOVEC-NOT: slcv.
// NOVEC-NOT: dlc.

// DLC:      "dlc.configure_access_engine"() ({
// DLC-NEXT:   %[[TU0:[0-9]+]] = "dlc.new_tu"(%{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}}) : (!slc.stream<index>, !slc.stream<index>, !slc.stream<index>) -> !dlc.tu
// DLC-NEXT:   %[[B:[0-9]+]] = "dlc.get_ind_var"(%[[TU0]])
// DLC:        %[[TU1:[0-9]+]] = "dlc.new_tu"(%[[TU0]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}})
// DLC-NEXT:   %[[J:[0-9]+]] = "dlc.get_ind_var"(%[[TU1]])
// DLC-NEXT:   "dlc.register_operand"(%[[TU1]], %[[B]]) {event = "begin"}
// DLC-NEXT:   "dlc.register_callback"(%[[TU1]]) {event = "begin", id = 0}
// DLC-NEXT:   %[[IDX:[0-9]+]] = "slc.mem_stream"(%indices, %[[J]])
// DLC-NEXT:   %[[ROW:[0-9]+]] = "slc.alu_stream"(%[[IDX]], %{{[0-9]+}}) {op = "clamp"}
// DLC-NEXT:   %[[TU2:[0-9]+]] = "dlc.new_tu"(%[[TU1]], %{{[0-9]+}}, %{{[0-9]+}}, %{{[0-9]+}})
// DLC-NEXT:   %[[K:[0-9]+]] = "dlc.get_ind_var"(%[[TU2]])
// DLC-NEXT:   %[[V:[0-9]+]] = "slc.mem_stream"(%table, %[[ROW]], %[[K]])
// DLC-NEXT:   "dlc.register_operand"(%[[TU2]], %[[B]]) {event = "iter"}
// DLC-NEXT:   "dlc.register_operand"(%[[TU2]], %[[K]]) {event = "iter"}
// DLC-NEXT:   "dlc.register_operand"(%[[TU2]], %[[V]]) {event = "iter"}
// DLC-NEXT:   "dlc.register_callback"(%[[TU2]]) {event = "iter", id = 1}
// DLC-NEXT: }) : () -> ()
// DLC-NEXT: "dlc.compute_loop"() ({
// DLC-NEXT:   %[[R0:[0-9]+]] = "dlc.pop_operand"() : () -> index
// DLC:          "memref.store"(%{{[0-9]+}}, %out, %[[R0]], %i)
// DLC:        "dlc.yield"() : () -> ()
// DLC-NEXT: }, {
// DLC-NEXT:   %[[BB:[0-9]+]] = "dlc.pop_operand"() : () -> index
// DLC-NEXT:   %[[KK:[0-9]+]] = "dlc.pop_operand"() : () -> index
// DLC-NEXT:   %[[X:[0-9]+]] = "dlc.pop_operand"() : () -> f32
// DLC-NEXT:   %[[ACC:[0-9]+]] = "memref.load"(%out, %[[BB]], %[[KK]])
// DLC-NEXT:   %[[SUM:[0-9]+]] = "arith.addf"(%[[ACC]], %[[X]])
// DLC-NEXT:   "memref.store"(%[[SUM]], %out, %[[BB]], %[[KK]])
// DLC-NEXT:   "dlc.yield"() : () -> ()
// DLC-NEXT: }) {cases = [0, 1], vars = []} : () -> ()

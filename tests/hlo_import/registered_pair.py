"""A composite tensor whose type spec is registered by name, as TF-GNN registers its
``GraphTensorSpec``: a SavedModel with a function taking one loads only in a process that
imported this module (``--tf_import=registered_pair``)."""

import tensorflow as tf
from tensorflow.python.framework import type_spec_registry


class Pair(tf.__internal__.CompositeTensor):
    def __init__(self, a, b):
        self.a, self.b = a, b

    @property
    def _type_spec(self):
        return PairSpec(tf.TensorSpec.from_tensor(self.a), tf.TensorSpec.from_tensor(self.b))


@type_spec_registry.register("registered_pair.PairSpec")
class PairSpec(tf.TypeSpec):
    value_type = property(lambda self: Pair)

    def __init__(self, a, b):
        self.a, self.b = a, b

    def _serialize(self):
        return (self.a, self.b)

    @property
    def _component_specs(self):
        return (self.a, self.b)

    def _to_components(self, value):
        return (value.a, value.b)

    def _from_components(self, components):
        return Pair(*components)

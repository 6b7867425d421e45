"""Imports the op families into the `kf` namespace (each family's ``__all__``)."""

import importlib

# Modules whose public names become kf.<name>. nn ops live under kf.nn instead.
FAMILIES = ("kernflow.core.ops.random_ops", "kernflow.core.ops.segment_ops",
            "kernflow.core.ops.init_ops", "kernflow.core.ops.variable_scope",
            "kernflow.core.ops.data_flow_ops", "kernflow.core.ops.accumulator_ops",
            "kernflow.core.ops.tensor_array_ops",
            "kernflow.core.ops.functional_ops", "kernflow.core.ops.sparse_ops", "kernflow.core.ops.check_ops",
            "kernflow.core.ops.math_ops_special", "kernflow.core.ops.math_ops_composite",
            "kernflow.core.ops.linalg_ops", "kernflow.core.ops.string_ops", "kernflow.core.ops.parsing_ops",
            "kernflow.core.ops.input_producers", "kernflow.core.ops.data_ops",
            "kernflow.core.ops.sparse_ops_more", "kernflow.core.ops.array_ops_more",
            "kernflow.core.ops.math_ops_more", "kernflow.core.ops.io_ops_more", "kernflow.core.ops.script_ops",
            "kernflow.core.ops.reader_ops", "kernflow.core.ops.lookup_ops", "kernflow.core.ops.misc_tf",
            "kernflow.core.ops.misc_ops_more", "kernflow.core.ops.audio_ops",
            "kernflow.core.ops.misc_ops_tf2", "kernflow.core.ops.critical_section_ops",
            "kernflow.core.ops.quantization_ops")


def load_optional_families(namespace: dict) -> None:
    for mod_name in FAMILIES:
        try:
            mod = importlib.import_module(mod_name)
        except ModuleNotFoundError as e:
            if e.name != mod_name:
                raise
            continue
        for n in getattr(mod, "__all__", []):
            namespace[n] = getattr(mod, n)

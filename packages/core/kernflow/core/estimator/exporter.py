"""Exporters of an `EvalSpec`: export a SavedModel after evaluations (TF1's tf.estimator.*Exporter).

`train_and_evaluate` calls `exporter.export(estimator, export_path, checkpoint_path, eval_result,
is_the_final_export)` after each evaluation, with `export_path` = `<model_dir>/export/<name>`.
`LatestExporter` exports every time and keeps the newest `exports_to_keep` timestamped exports;
`FinalExporter` exports only the evaluation of the last checkpoint (global step >= max_steps).
"""

from __future__ import annotations

import logging
import os
import shutil

__all__ = ["Exporter", "LatestExporter", "FinalExporter"]

_log = logging.getLogger(__name__)


class Exporter:
    """The base of exporters: a `name` and an `export` method."""

    @property
    def name(self):
        """The directory name under `<model_dir>/export` (None: export directly there)."""
        raise NotImplementedError

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        """Exports `checkpoint_path` of `estimator` under `export_path`; returns the export dir or None."""
        raise NotImplementedError


class _SavedModelExporter(Exporter):
    """Exports through `Estimator.export_saved_model`."""

    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False):
        if not name:
            raise ValueError("`name` must be a non-empty string.")
        if not callable(serving_input_receiver_fn):
            raise ValueError(f"serving_input_receiver_fn must be callable; got {serving_input_receiver_fn!r}")
        self._name = name
        self._serving_input_receiver_fn = serving_input_receiver_fn
        self._assets_extra = assets_extra
        self._as_text = as_text

    @property
    def name(self):
        return self._name

    def _export(self, estimator, export_path, checkpoint_path):
        return estimator.export_saved_model(export_path, self._serving_input_receiver_fn,
                                            assets_extra=self._assets_extra, as_text=self._as_text,
                                            checkpoint_path=checkpoint_path)


class LatestExporter(_SavedModelExporter):
    """Exports after every evaluation, keeping the latest `exports_to_keep` exports.

    Args:
        name: the export directory's name under `<model_dir>/export`.
        serving_input_receiver_fn: as `Estimator.export_saved_model`.
        assets_extra: as `Estimator.export_saved_model`.
        as_text: as `Estimator.export_saved_model`.
        exports_to_keep: how many exports to keep (None: all).

    Raises:
        ValueError: an empty name, a non-callable receiver fn, or `exports_to_keep` < 1.
    """

    def __init__(self, name, serving_input_receiver_fn, assets_extra=None, as_text=False,
                 exports_to_keep=5):
        super().__init__(name, serving_input_receiver_fn, assets_extra, as_text)
        if exports_to_keep is not None and exports_to_keep <= 0:
            raise ValueError("`exports_to_keep`, if provided, must be a positive number. Got "
                             f"{exports_to_keep}")
        self._exports_to_keep = exports_to_keep

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        export_dir = self._export(estimator, export_path, checkpoint_path)
        self._garbage_collect_exports(export_path)
        return export_dir

    def _garbage_collect_exports(self, export_path):
        if self._exports_to_keep is None or not os.path.isdir(export_path):
            return
        stamps = sorted(int(d) for d in os.listdir(export_path)
                        if d.isdigit() and os.path.isdir(os.path.join(export_path, d)))
        for stamp in stamps[:-self._exports_to_keep]:
            shutil.rmtree(os.path.join(export_path, str(stamp)), ignore_errors=True)


class FinalExporter(_SavedModelExporter):
    """Exports once, after the evaluation of the final checkpoint.

    Args: as `LatestExporter`, without `exports_to_keep`.
    """

    def export(self, estimator, export_path, checkpoint_path, eval_result, is_the_final_export):
        if not is_the_final_export:
            return None
        _log.info("Performing the final export in the end of training.")
        return self._export(estimator, export_path, checkpoint_path)

"""Contract cases of the candidate samplers and ComputeAccidentalHits.

Sampled classes are random: the samplers' cases check ranges, uniqueness and the expected-count
formula for the classes drawn; tests/ops/test_candidate_samplers.py checks the distributions.
"""

import numpy as np

import kernflow.core as kf
from kernflow.core.testing.kernel_contract import OpCase

_TRUE = np.array([[0, 3], [7, 1], [2, 2]], np.int64)
_RANGE, _N = 10, 6


def _uniform_p(ids):
    return np.full(np.shape(ids), 1.0 / _RANGE)


def _log_uniform_p(ids):
    ids = np.asarray(ids, np.float64)
    return np.log((ids + 2) / (ids + 1)) / np.log(_RANGE + 1)


def _unigram_p(ids):
    w = np.arange(1, _RANGE + 1, dtype=np.float64)
    return w[ids] / w.sum()


def _check(prob, unique):
    def compare(actual, _expected):
        sampled, true_count, sampled_count = actual
        assert sampled.shape == (_N,) and sampled.min() >= 0 and sampled.max() < _RANGE
        if unique:
            assert np.unique(sampled).size == _N, sampled
            # Expected counts are monotone in p and, for p*N counts, exactly p * N.
            assert np.all((sampled_count > 0) & (sampled_count <= 1 + 1e-6))
        else:
            np.testing.assert_allclose(sampled_count, prob(sampled) * _N, rtol=1e-6)
            np.testing.assert_allclose(true_count, prob(_TRUE) * _N, rtol=1e-6)
    return compare


def _sampler(fn, unique, **kw):
    def build(t):
        return list(fn(t, 2, _N, unique, _RANGE, seed=3, **kw))
    return build


def _tuple_compare(compare):
    # run_case compares outputs one at a time; the samplers' outputs are checked together.
    state = {}

    def one(actual, _expected):
        state.setdefault("outs", []).append(actual)
        if len(state["outs"]) == 3:
            outs, state["outs"] = state["outs"], []
            compare(outs, None)
    return one


def _hits_reference(t, s):
    pos = {int(v): j for j, v in enumerate(s)}
    hits = [(i, pos[int(c)]) for i in range(t.shape[0]) for c in t[i] if int(c) in pos]
    rows = np.array([h[0] for h in hits], np.int32)
    ids = np.array([h[1] for h in hits], np.int64)
    return [rows, ids, np.full(len(hits), -np.finfo(np.float32).max, np.float32)]


CASES = []
for _fn, _prob in ((kf.nn.uniform_candidate_sampler, _uniform_p),
                   (kf.nn.log_uniform_candidate_sampler, _log_uniform_p),
                   (kf.nn.learned_unigram_candidate_sampler, _uniform_p)):
    _op = {"uniform": "UniformCandidateSampler", "log_uniform": "LogUniformCandidateSampler",
           "learned_unigram": "LearnedUnigramCandidateSampler"}[_fn.__name__[:-18]]
    for _u in (False, True):
        CASES.append(OpCase(_op, _sampler(_fn, _u), [_TRUE], reference=lambda t: [t, t, t],
                            compare=_tuple_compare(_check(_prob, _u)), name=f"unique{int(_u)}"))
CASES += [
    OpCase("FixedUnigramCandidateSampler",
           _sampler(kf.nn.fixed_unigram_candidate_sampler, False,
                    unigrams=list(range(1, _RANGE + 1))),
           [_TRUE], reference=lambda t: [t, t, t], compare=_tuple_compare(_check(_unigram_p, False))),
    OpCase("AllCandidateSampler", lambda t: list(kf.nn.all_candidate_sampler(t, 2, 4, True)),
           [_TRUE], reference=lambda t: [np.arange(4), np.ones(t.shape, np.float32),
                                         np.ones(4, np.float32)]),
    OpCase("ComputeAccidentalHits", lambda t, s: list(kf.nn.compute_accidental_hits(t, s, 2)),
           [_TRUE, np.array([1, 5, 2, 3, 1], np.int64)], reference=_hits_reference),
]

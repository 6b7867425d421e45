"""Candidate samplers and compute_accidental_hits (kernflow/core/ops/candidate_sampling_ops.py):
distributions, TF's expected-count formulas, uniqueness, seeds, learned counts and errors."""

import numpy as np
import pytest

import kernflow.core as kf
from kernflow.core.framework import errors
from kernflow.core.ops.candidate_sampling_ops import CANDIDATE_SAMPLING_OPS

TRUE = np.array([[0, 3], [7, 1]], np.int64)
R = 20


def _run(t, n=1):
    with kf.Session() as sess:
        return [sess.run(t) for _ in range(n)]


def _log_uniform_p(ids, r=R):
    ids = np.asarray(ids, np.float64)
    return np.log((ids + 2) / (ids + 1)) / np.log(r + 1)


def _uniform_p(ids, r=R):
    return np.full(np.shape(ids), 1.0 / r)


SAMPLERS = {"uniform": (kf.nn.uniform_candidate_sampler, _uniform_p),
            "log_uniform": (kf.nn.log_uniform_candidate_sampler, _log_uniform_p)}


@pytest.mark.parametrize("kind", list(SAMPLERS))
def test_distribution_and_expected_counts_without_replacement_off(kind):
    fn, prob = SAMPLERS[kind]
    with kf.Graph().as_default():
        out = fn(TRUE, 2, 5000, False, R, seed=7)
        assert [t.shape.as_list() for t in out] == [[5000], [2, 2], [5000]]
        assert [t.dtype for t in out] == [kf.int64, kf.float32, kf.float32]
        sampled, true_c, sampled_c = _run(out)[0]
    freq = np.bincount(sampled, minlength=R) / sampled.size
    p = prob(np.arange(R))
    # 5000 draws: binomial std <= sqrt(p / 5000) < 0.011; 5 std is generous but meaningful.
    np.testing.assert_allclose(freq, p, atol=5 * np.sqrt(p.max() / 5000))
    np.testing.assert_allclose(true_c, prob(TRUE) * 5000, rtol=1e-5)
    np.testing.assert_allclose(sampled_c, prob(sampled) * 5000, rtol=1e-5)


@pytest.mark.parametrize("kind", list(SAMPLERS))
def test_unique_samples_and_expected_count_correction(kind):
    fn, prob = SAMPLERS[kind]
    with kf.Graph().as_default():
        sampled, true_c, sampled_c = _run(fn(TRUE, 2, 12, True, R, seed=3))[0]
    assert np.unique(sampled).size == 12
    # Invert the formula for num_tries: it must be one integer >= 12, the same for every class.
    tries = np.log1p(-sampled_c.astype(np.float64)) / np.log1p(-prob(sampled))
    n = int(round(tries[0]))
    assert n >= 12
    np.testing.assert_allclose(tries, n, rtol=1e-3)
    np.testing.assert_allclose(sampled_c, -np.expm1(n * np.log1p(-prob(sampled))), rtol=1e-5)
    np.testing.assert_allclose(true_c, -np.expm1(n * np.log1p(-prob(TRUE))), rtol=1e-5)


def test_unique_covers_the_whole_range():
    with kf.Graph().as_default():
        sampled, _, _ = _run(kf.nn.uniform_candidate_sampler(TRUE, 2, R, True, R, seed=1))[0]
    assert sorted(sampled) == list(range(R))


def test_seeds_repeat_per_session_and_advance_per_run():
    with kf.Graph().as_default():
        s = kf.nn.log_uniform_candidate_sampler(TRUE, 2, 8, False, 1000, seed=5)[0]
        a1, a2 = _run(s, 2)
        b1, _ = _run(s, 2)
    np.testing.assert_array_equal(a1, b1)
    assert not np.array_equal(a1, a2)
    with kf.Graph().as_default():
        kf.set_random_seed(11)
        s1 = kf.random.uniform_candidate_sampler(TRUE, 2, 8, False, 1000)[0]
        s2 = kf.random.uniform_candidate_sampler(TRUE, 2, 8, False, 1000)[0]
        assert s1.op.get_attr("seed") == 11 and s1.op.get_attr("seed2") != s2.op.get_attr("seed2")
        v1, v2 = _run([s1, s2])[0]
    assert not np.array_equal(v1, v2)


def test_fixed_unigram_with_distortion_reserved_ids_and_shards(tmp_path):
    counts = np.arange(1, 9, dtype=np.float64)          # ids 2..9 after 2 reserved ids
    w = np.concatenate([[0, 0], counts ** 0.5])
    shard_w = w[np.arange(10) % 2 == 1]                  # shard 1 of 2: ids 1, 3, 5, 7, 9
    vocab = tmp_path / "vocab.csv"
    vocab.write_text("".join(f"w{i},{c}\n" for i, c in enumerate(counts)))
    with kf.Graph().as_default():
        outs = [kf.nn.fixed_unigram_candidate_sampler(
            np.array([[0], [3]], np.int64), 1, 4000, False, 5, distortion=0.5, num_reserved_ids=2,
            num_shards=2, shard=1, seed=2, **src) for src in ({"unigrams": list(counts)},
                                                              {"vocab_file": str(vocab)})]
        res = _run(outs)[0]
    p = shard_w / shard_w.sum()
    for sampled, true_c, sampled_c in res:
        np.testing.assert_allclose(np.bincount(sampled, minlength=5) / 4000, p, atol=0.04)
        np.testing.assert_allclose(true_c[:, 0], p[[0, 3]] * 4000, rtol=1e-5)
        np.testing.assert_allclose(sampled_c, p[sampled] * 4000, rtol=1e-5)


def test_learned_unigram_learns_from_true_classes():
    with kf.Graph().as_default():
        t = kf.placeholder(kf.int64, [None, 1])
        sampled, true_c, _ = kf.nn.learned_unigram_candidate_sampler(t, 1, 1000, False, 4, seed=9)
        with kf.Session() as sess:
            first = sess.run(true_c, {t: [[2]]})
            # Counts start at 1 each; the first run's draw happens before it counts its classes.
            np.testing.assert_allclose(first, [[250.0]])
            sess.run(sampled, {t: np.full((96, 1), 2)})
            # Now class 2 has count 1 + 1 + 96 = 98 of 101.
            s, c = sess.run([sampled, true_c], {t: [[2]]})
            np.testing.assert_allclose(c, [[1000 * 98 / 101]], rtol=1e-5)
            assert (s == 2).mean() > 0.9
        with kf.Session() as sess:   # a new session starts from uniform counts again
            np.testing.assert_allclose(sess.run(true_c, {t: [[2]]}), [[250.0]])


def test_all_candidate_sampler():
    with kf.Graph().as_default():
        s, t, c = _run(kf.nn.all_candidate_sampler(TRUE, 2, 6, True))[0]
    np.testing.assert_array_equal(s, np.arange(6))
    np.testing.assert_array_equal(t, np.ones((2, 2)))
    np.testing.assert_array_equal(c, np.ones(6))


def test_compute_accidental_hits_exact():
    true = np.array([[1, 4], [2, 9], [5, 5]], np.int64)
    sampled = np.array([4, 2, 7, 5, 4, 3], np.int64)
    with kf.Graph().as_default():
        rows, ids, w = _run(kf.nn.compute_accidental_hits(true, sampled, 2))[0]
    # TF's order: rows, then each row's true classes; a class sampled twice maps to its last slot.
    np.testing.assert_array_equal(rows, [0, 1, 2, 2])
    np.testing.assert_array_equal(ids, [4, 1, 3, 3])
    np.testing.assert_array_equal(w, np.full(4, -np.finfo(np.float32).max, np.float32))
    assert rows.dtype == np.int32 and ids.dtype == np.int64


def test_errors_name_the_op():
    with kf.Graph().as_default():
        with pytest.raises(ValueError, match="UniformCandidateSampler.*num_true=3 columns"):
            kf.nn.uniform_candidate_sampler(TRUE, 3, 4, False, R)
        with pytest.raises(ValueError, match="true_classes must be a matrix"):
            kf.nn.log_uniform_candidate_sampler([1, 2], 1, 4, False, R)
        with pytest.raises(ValueError, match="shard must be in"):
            kf.nn.fixed_unigram_candidate_sampler(TRUE, 2, 4, False, R, unigrams=[1.0], shard=2)
        too_many = kf.nn.uniform_candidate_sampler(TRUE, 2, 30, True, R)
        with pytest.raises(errors.InvalidArgumentError, match="UniformCandidateSampler.*range is too"):
            _run(too_many)
        bad_range = kf.nn.fixed_unigram_candidate_sampler(TRUE, 2, 4, False, R, unigrams=[1.0, 2.0])
        with pytest.raises(errors.InvalidArgumentError, match="range_max .20. must equal"):
            _run(bad_range)
        neither = kf.nn.fixed_unigram_candidate_sampler(TRUE, 2, 4, False, R)
        with pytest.raises(errors.InvalidArgumentError, match="either vocab_file or unigrams"):
            _run(neither)
        ph = kf.placeholder(kf.int64)
        s = kf.nn.uniform_candidate_sampler(ph, 2, 4, False, R)[0]
        with kf.Session() as sess, pytest.raises(errors.InvalidArgumentError, match="num_true columns"):
            sess.run(s, {ph: [[1, 2, 3]]})


def test_samplers_are_stateful_and_not_merged():
    with kf.Graph().as_default():
        a = kf.nn.uniform_candidate_sampler(TRUE, 2, 50, False, 1000)[0]
        b = kf.nn.uniform_candidate_sampler(TRUE, 2, 50, False, 1000)[0]
        from kernflow.core.framework import op_def_registry
        assert all(op_def_registry.get(t).stateful for t in CANDIDATE_SAMPLING_OPS[:-1])
        va, vb = _run([a, b])[0]
    assert not np.array_equal(va, vb)

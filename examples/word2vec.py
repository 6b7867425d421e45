"""Skip-gram word2vec with embeddings sharded over 2 ps tasks, trained with `kf.nn.nce_loss`.

The corpus is real text that every Python install carries: the docstrings (module, class and
function) of the standard library, read with `ast` from the .py files under
``sysconfig.get_paths()["stdlib"]`` (test directories and site-packages skipped), lowercased and
split into words of two or more letters. The token list is cached, one docstring per line, in
``--data-dir`` (default ``~/.cache/kernflow``) so later runs start at once.

The vocabulary holds the `--vocab-size` most frequent words (id 0 is UNK, for the rest). The
embedding table, the NCE weights and the NCE biases have `--vocab-size` rows (50,000 by default:
the standard library's docstrings hold fewer distinct words than that, so the rows past the last
word are never touched), each a `kf.get_variable` with ``partitioner=fixed_size_partitioner(2)``
under `kf.train.replica_device_setter`: part 0 lives on /job:ps/task:0 and part 1 on
/job:ps/task:1. Lookups and NCE use ``partition_strategy="mod"`` (TF's default), so the words,
which take the lowest ids in frequency order, are spread evenly over both shards. The sampler
draws negatives only among the ids that are words.

Skip-gram pairs are made with numpy: around every token, a random window of 1 to `--window`
words on each side (within the same docstring), after word2vec's subsampling of frequent words;
batches are fed through placeholders with `Session.make_callable`. The worker looks up the unique
ids of a batch, and Adagrad (on the batch's summed loss) updates only the rows the batch touched,
on the ps that owns them. The embeddings start small and the NCE weights at zero, as in the
original word2vec. Batches are large (1024 pairs) because a step through the cluster has a fixed
cost of tens of milliseconds.

By default the example starts a cluster of 1 worker and 2 ps as `kf.train.Server`s in this
process and trains through the worker; ``--target grpc://...|etcd://...`` uses an existing cluster
that has a ps job of at least 2 tasks (``kernflow cluster up --ps 2``); ``--local`` runs embedded,
with no servers (both parts then on the local CPU).

Prints where the shards live, the loss averaged over every `--log-every` steps, the throughput
(pairs/s) and, at the end, the nearest neighbours (cosine similarity of the mean-centred
vectors) of a few common words.

Usage: python examples/word2vec.py [--steps 2500] [--batch-size 1024] [--quick] [--local]
       [--target grpc://HOST:PORT] [--vocab-size 50000] [--data-dir DIR] [--seed 0]
"""

from __future__ import annotations

import argparse
import ast
import collections
import os
import re
import sys
import sysconfig
import time

import numpy as np

import kernflow.core as kf

CORPUS_FILE = "word2vec_corpus.txt"
QUERY_WORDS = ["file", "list", "return", "string", "error", "number", "true", "class", "thread",
               "socket"]
SKIP_DIRS = {"site-packages", "dist-packages", "__pycache__", "idle_test", "test", "tests"}
WORD = re.compile(r"[a-z]+")


# ---------------------------------------------------------------------------- corpus
def _docstrings(path):
    """The docstrings of a module, its classes and its functions; [] if it does not parse."""
    try:
        with open(path, encoding="utf-8") as f:
            tree = ast.parse(f.read())
    except (SyntaxError, UnicodeDecodeError, ValueError, OSError):
        return []
    kinds = (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
    docs = (ast.get_docstring(node, clean=False) for node in ast.walk(tree)
            if isinstance(node, kinds))
    return [d for d in docs if d]


def stdlib_documents(root=None):
    """Yields one token list per docstring of the standard library's .py files."""
    root = root or sysconfig.get_paths()["stdlib"]
    for folder, dirs, files in os.walk(root):
        dirs[:] = sorted(d for d in dirs if d not in SKIP_DIRS and not d.startswith("test"))
        for name in sorted(files):
            if not name.endswith(".py"):
                continue
            for doc in _docstrings(os.path.join(folder, name)):
                words = [w for w in WORD.findall(doc.lower()) if len(w) >= 2]
                if words:
                    yield words


def load_corpus(data_dir):
    """The corpus as a list of token lists, read from the cache or built (and cached) first."""
    path = os.path.join(data_dir, CORPUS_FILE)
    if not os.path.exists(path):
        os.makedirs(data_dir, exist_ok=True)
        tmp = f"{path}.{os.getpid()}.tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            for words in stdlib_documents():
                f.write(" ".join(words) + "\n")
        os.replace(tmp, path)
    with open(path, encoding="utf-8") as f:
        return [line.split() for line in f if line.strip()]


def build_vocabulary(docs, vocab_size):
    """Maps the corpus to ids.

    Returns:
        (ids, doc_of, words, counts): int32 ids of every token, the docstring each token belongs
        to, the words by id (words[0] is "UNK") and their counts in the corpus.
    """
    counter = collections.Counter(w for doc in docs for w in doc)
    common = counter.most_common(vocab_size - 1)
    words = ["UNK"] + [w for w, _ in common]
    index = {w: i for i, w in enumerate(words)}
    flat = [w for doc in docs for w in doc]
    ids = np.array([index.get(w, 0) for w in flat], np.int32)
    doc_of = np.repeat(np.arange(len(docs), dtype=np.int32), [len(d) for d in docs])
    counts = np.bincount(ids, minlength=len(words)).astype(np.int64)
    return ids, doc_of, words, counts


# ---------------------------------------------------------------------------- skip-gram pairs
def skipgram_pairs(ids, doc_of, counts, window, rng, sample=1e-3):
    """One epoch of shuffled (center, context) pairs, word2vec style.

    Frequent words are dropped with probability 1 - (sqrt(f / sample) + 1) * sample / f (f: the
    word's share of the corpus); each remaining token gets a random window of 1..`window` words
    each side, and pairs never cross a docstring boundary.
    """
    freq = counts[ids] / counts.sum()
    keep_p = np.minimum(1.0, (np.sqrt(freq / sample) + 1) * sample / freq) if sample else 1.0
    kept = rng.random_sample(len(ids)) < keep_p
    ids, doc_of = ids[kept], doc_of[kept]
    reach = rng.randint(1, window + 1, size=len(ids))
    centers, contexts = [], []
    for d in range(1, window + 1):
        same = doc_of[:-d] == doc_of[d:]
        ahead = same & (reach[:-d] >= d)          # token i, context i + d
        behind = same & (reach[d:] >= d)          # token i + d, context i
        centers += [ids[:-d][ahead], ids[d:][behind]]
        contexts += [ids[d:][ahead], ids[:-d][behind]]
    centers, contexts = np.concatenate(centers), np.concatenate(contexts)
    order = rng.permutation(len(centers))
    return centers[order], contexts[order]


def batches(ids, doc_of, counts, args, rng):
    """Endless (centers [B], contexts [B, 1]) batches, epoch after epoch."""
    while True:
        centers, contexts = skipgram_pairs(ids, doc_of, counts, args.window, rng, args.subsample)
        for i in range(0, len(centers) - args.batch_size + 1, args.batch_size):
            yield centers[i:i + args.batch_size], contexts[i:i + args.batch_size, None].astype(np.int64)


# ---------------------------------------------------------------------------- model
def build_model(args, num_words):
    """The sharded skip-gram model; call it under the device scope that places the variables.

    Returns:
        A dict: placeholders "centers" [B] and "contexts" [B, 1], the PartitionedVariables
        "embeddings", "nce_weights" and "nce_biases", "loss" (mean NCE loss), "train_op" and
        "word_vectors" [num_words, dim] (every word's embedding, in id order).
    """
    rows, dim = args.vocab_size, args.dim
    partitioner = kf.fixed_size_partitioner(2)
    centers = kf.placeholder(kf.int32, [None], name="centers")
    contexts = kf.placeholder(kf.int64, [None, 1], name="contexts")
    # word2vec's own start: small random embeddings, zero output weights. No op seeds: the
    # initializer runs once per part, and a fixed seed would give both parts the same values.
    embeddings = kf.get_variable("embeddings", [rows, dim], partitioner=partitioner,
                                 initializer=kf.random_uniform_initializer(-0.5 / dim, 0.5 / dim))
    nce_weights = kf.get_variable("nce_weights", [rows, dim], partitioner=partitioner,
                                  initializer=kf.zeros_initializer())
    nce_biases = kf.get_variable("nce_biases", [rows], partitioner=partitioner,
                                 initializer=kf.zeros_initializer())
    # Look each id up once: a batch of 1024 centers holds far fewer distinct words.
    unique, idx = kf.unique(centers)
    embedded = kf.gather(kf.nn.embedding_lookup(embeddings, unique, partition_strategy="mod"), idx)
    sampled = kf.nn.log_uniform_candidate_sampler(contexts, 1, args.num_sampled, True, num_words,
                                                  seed=args.seed)
    per_example = kf.nn.nce_loss(nce_weights, nce_biases, contexts, embedded, args.num_sampled,
                                 num_words, sampled_values=sampled, partition_strategy="mod")
    loss = kf.reduce_mean(per_example)
    # Adagrad on the batch's summed loss: each pair pulls its rows as hard whatever the batch size.
    train_op = kf.train.AdagradOptimizer(args.lr).minimize(kf.reduce_sum(per_example))
    # Row i of embeddings.as_tensor() is not word i under "mod": look every word up instead.
    word_vectors = kf.nn.embedding_lookup(embeddings, kf.range(num_words), partition_strategy="mod")
    return {"centers": centers, "contexts": contexts, "embeddings": embeddings,
            "nce_weights": nce_weights, "nce_biases": nce_biases, "loss": loss,
            "train_op": train_op, "word_vectors": word_vectors}


def nearest_neighbours(vectors, words, queries, k):
    """{query: [(word, cosine), ...]}: the `k` words nearest each query in the vocabulary.

    Cosines are taken after subtracting the mean word vector: negatives shared by a whole batch
    push every embedding along one common direction, which would otherwise put every cosine
    near 1 (the order hardly changes).
    """
    index = {w: i for i, w in enumerate(words)}
    centred = vectors - vectors[1:].mean(axis=0)
    unit = centred / np.maximum(np.linalg.norm(centred, axis=1, keepdims=True), 1e-12)
    out = {}
    for q in queries:
        if q not in index:
            continue
        sims = unit @ unit[index[q]]
        sims[[0, index[q]]] = -np.inf                   # neither UNK nor the word itself
        best = np.argsort(-sims)[:k]
        out[q] = [(words[i], float(sims[i])) for i in best]
    return out


# ---------------------------------------------------------------------------- cluster
class InProcessCluster:
    """1 worker + 2 ps `kf.train.Server`s on free localhost ports; `stop()` stops them all."""

    def __init__(self, ps_tasks=2):
        from kernflow.core.testing.processes import free_ports
        ports = free_ports(1 + ps_tasks)
        self.spec = kf.train.ClusterSpec({"worker": [f"localhost:{ports[0]}"],
                                          "ps": [f"localhost:{p}" for p in ports[1:]]})
        self.servers = [kf.train.Server(self.spec, job_name="worker", task_index=0)]
        self.servers += [kf.train.Server(self.spec, job_name="ps", task_index=i)
                         for i in range(ps_tasks)]
        self.target = self.servers[0].target

    def stop(self):
        for server in self.servers:
            server.stop()


def remote_device_setter(target):
    """A replica_device_setter for the ps tasks of the cluster at `target`.

    Raises:
        SystemExit: the cluster has fewer than 2 ps tasks.
    """
    from kernflow.core.framework import device_spec
    with kf.Session(target, graph=kf.Graph()) as probe:
        specs = [device_spec.DeviceSpec.from_string(d.name) for d in probe.list_devices()]
    ps_tasks = len({s.task for s in specs if s.job == "ps"})
    if ps_tasks < 2:
        raise SystemExit(f"{target}: the embeddings need a ps job of at least 2 tasks, it has "
                         f"{ps_tasks} (start one with `kernflow cluster up --ps 2`)")
    own = next(s for s in specs if s.job != "ps")
    return kf.train.replica_device_setter(ps_tasks=ps_tasks,
                                          worker_device=f"/job:{own.job}/task:{own.task}")


# ---------------------------------------------------------------------------- main
def parse_args(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=2500)
    p.add_argument("--quick", action="store_true", help="a short run (used by the test)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--dim", type=int, default=128)
    p.add_argument("--vocab-size", type=int, default=50_000)
    p.add_argument("--window", type=int, default=4, help="the largest window each side")
    p.add_argument("--subsample", type=float, default=1e-3, help="0 keeps every token")
    p.add_argument("--num-sampled", type=int, default=64)
    p.add_argument("--lr", type=float, default=0.2, help="Adagrad's learning rate")
    p.add_argument("--log-every", type=int, default=500)
    p.add_argument("--neighbours", type=int, default=8)
    p.add_argument("--data-dir", default=os.path.join(os.path.expanduser("~"), ".cache", "kernflow"))
    p.add_argument("--seed", type=int, default=0)
    where = p.add_mutually_exclusive_group()
    where.add_argument("--target", help="grpc://... or etcd://... of a cluster with >= 2 ps tasks")
    where.add_argument("--local", action="store_true", help="embedded, no servers")
    args = p.parse_args(argv)
    if args.quick:
        args.steps, args.log_every = 160, 40
    if args.vocab_size < 2:
        p.error("--vocab-size must be at least 2")
    return args


def train(args, target, device_setter, ids, doc_of, counts, words):
    """Builds the graph, trains and prints; returns the final embeddings as numpy."""
    rng = np.random.RandomState(args.seed)
    g = kf.Graph()
    with g.as_default():
        kf.set_random_seed(args.seed)
        with kf.device(device_setter):
            model = build_model(args, len(words))
        init = kf.global_variables_initializer()
    for name in ("embeddings", "nce_weights", "nce_biases"):
        for part in model[name]:
            print(f"shard {part.name:28s} {str(part.get_shape()):14s} on {part.device or '(local)'}")
    with kf.Session(target, graph=g) as sess:
        sess.run(init)
        step_fn = sess.make_callable([model["train_op"], model["loss"]],
                                     [model["centers"], model["contexts"]])
        source = batches(ids, doc_of, counts, args, rng)
        window, start = [], time.time()
        for step in range(1, args.steps + 1):
            _, loss = step_fn(*next(source))
            window.append(loss)
            if step % args.log_every == 0 or step == args.steps:
                seconds = time.time() - start
                print(f"step {step:6d}  loss {np.mean(window):8.4f}  "
                      f"{step * args.batch_size / seconds:8.0f} pairs/s", flush=True)
                window = []
        seconds = time.time() - start
        print(f"trained {args.steps} steps of {args.batch_size} pairs in {seconds:.1f} s: "
              f"{args.steps * args.batch_size / seconds:.0f} pairs/s")
        return sess.run(model["word_vectors"])


def main(argv=None):
    args = parse_args(argv)
    t0 = time.time()
    docs = load_corpus(args.data_dir)
    ids, doc_of, words, counts = build_vocabulary(docs, args.vocab_size)
    print(f"corpus: {len(ids):,} tokens in {len(docs):,} docstrings of the standard library "
          f"({time.time() - t0:.1f} s); vocabulary: {len(words) - 1:,} words + UNK "
          f"({counts[0]:,} UNK tokens) in {args.vocab_size:,}-row tables")
    if len(words) <= args.num_sampled:
        raise SystemExit(f"--num-sampled {args.num_sampled} needs a vocabulary of more words")
    cluster = None
    if args.local:
        target, setter = "", None
    elif args.target:
        target, setter = args.target, remote_device_setter(args.target)
    else:
        cluster = InProcessCluster()
        target, setter = cluster.target, kf.train.replica_device_setter(cluster=cluster.spec)
        print(f"in-process cluster: {cluster.spec.as_dict()}")
    try:
        vectors = train(args, target, setter, ids, doc_of, counts, words)
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"nearest neighbours (cosine) of {args.neighbours}:")
    for q, near in nearest_neighbours(vectors, words, QUERY_WORDS, args.neighbours).items():
        print(f"  {q:>8s}: " + ", ".join(f"{w} {s:.2f}" for w, s in near))


if __name__ == "__main__":
    main(sys.argv[1:])

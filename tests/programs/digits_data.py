"""Offline stand-in for ``tensorflow.examples.tutorials.mnist.input_data``.

The classic TF1 programs call ``input_data.read_data_sets(dir, one_hot=True)`` and then
``mnist.train.next_batch(n)``. This module serves scikit-learn's bundled 8x8 digits (1797 images,
pixels scaled to [0, 1], flattened to 64 floats) through the same interface, so the programs read
no network data. The split is fixed: 1257 train, 180 validation, 360 test images.
"""

import collections

import numpy as np
from sklearn.datasets import load_digits

IMAGE_SIZE = 8
NUM_PIXELS = IMAGE_SIZE * IMAGE_SIZE
NUM_CLASSES = 10

Datasets = collections.namedtuple("Datasets", ["train", "validation", "test"])


class DataSet:
    """The subset of TF's ``mnist.DataSet`` that the example programs use."""

    def __init__(self, images, labels, seed):
        self._images = images
        self._labels = labels
        self._rng = np.random.RandomState(seed)
        self._index = 0
        self._epochs_completed = 0
        self._perm = self._rng.permutation(len(images))

    @property
    def images(self):
        return self._images

    @property
    def labels(self):
        return self._labels

    @property
    def num_examples(self):
        return len(self._images)

    @property
    def epochs_completed(self):
        return self._epochs_completed

    def next_batch(self, batch_size, shuffle=True):
        if self._index + batch_size > self.num_examples:
            self._epochs_completed += 1
            self._index = 0
            self._perm = self._rng.permutation(self.num_examples) if shuffle else np.arange(self.num_examples)
        idx = self._perm[self._index:self._index + batch_size]
        self._index += batch_size
        return self._images[idx], self._labels[idx]


def read_data_sets(train_dir=None, one_hot=False, seed=0):
    """Returns ``Datasets(train, validation, test)``; ``train_dir`` is ignored (nothing is downloaded)."""
    digits = load_digits()
    images = (digits.data / 16.0).astype(np.float32)
    labels = digits.target.astype(np.int64)
    if one_hot:
        labels = np.eye(NUM_CLASSES, dtype=np.float32)[labels]
    order = np.random.RandomState(seed).permutation(len(images))
    images, labels = images[order], labels[order]
    splits = [(0, 1257), (1257, 1437), (1437, 1797)]
    return Datasets(*[DataSet(images[a:b], labels[a:b], seed + i) for i, (a, b) in enumerate(splits)])

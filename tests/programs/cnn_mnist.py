# Follows tensorflow/examples/tutorials/layers/cnn_mnist.py (the TF 1.x "Build a Convolutional Neural
# Network using Estimators" tutorial): a tf.layers CNN (conv2d, max_pooling2d, dense, dropout) in a
# model_fn with tf.losses.sparse_softmax_cross_entropy and tf.metrics.accuracy, trained and
# evaluated by tf.estimator.Estimator with numpy_input_fn and a LoggingTensorHook.
# Adapted: the first import line; the data are scikit-learn's 8x8 digits read offline through
# digits_data (instead of tf.contrib.learn.datasets.load_dataset("mnist")), so the input layer is
# [-1, 8, 8, 1] and pool2_flat is [-1, 2 * 2 * 64]; 300 steps instead of 20000 with learning rate
# 0.01 -> 0.05; the model_dir is a temporary directory; the first and last logged loss and the
# evaluated accuracy are recorded for the RESULT line.
"""Convolutional Neural Network Estimator for MNIST, built with tf.layers."""

from __future__ import absolute_import
from __future__ import division
from __future__ import print_function

import tempfile
import time

import numpy as np
import kernflow.core as tf

import digits_data

tf.logging.set_verbosity(tf.logging.INFO)

LOSSES = []


def cnn_model_fn(features, labels, mode):
  """Model function for CNN."""
  # Input Layer
  # Reshape X to 4-D tensor: [batch_size, width, height, channels]
  # MNIST images are 8x8 pixels, and have one color channel
  input_layer = tf.reshape(features["x"], [-1, 8, 8, 1])

  # Convolutional Layer #1
  conv1 = tf.layers.conv2d(
      inputs=input_layer,
      filters=32,
      kernel_size=[5, 5],
      padding="same",
      activation=tf.nn.relu)

  # Pooling Layer #1
  pool1 = tf.layers.max_pooling2d(inputs=conv1, pool_size=[2, 2], strides=2)

  # Convolutional Layer #2
  conv2 = tf.layers.conv2d(
      inputs=pool1,
      filters=64,
      kernel_size=[5, 5],
      padding="same",
      activation=tf.nn.relu)
  pool2 = tf.layers.max_pooling2d(inputs=conv2, pool_size=[2, 2], strides=2)

  # Flatten tensor into a batch of vectors
  pool2_flat = tf.reshape(pool2, [-1, 2 * 2 * 64])

  # Dense Layer
  dense = tf.layers.dense(inputs=pool2_flat, units=1024, activation=tf.nn.relu)

  # Add dropout operation; 0.6 probability that element will be kept
  dropout = tf.layers.dropout(
      inputs=dense, rate=0.4, training=mode == tf.estimator.ModeKeys.TRAIN)

  # Logits layer
  logits = tf.layers.dense(inputs=dropout, units=10)

  predictions = {
      # Generate predictions (for PREDICT and EVAL mode)
      "classes": tf.argmax(input=logits, axis=1),
      # Add `softmax_tensor` to the graph. It is used for PREDICT and by the
      # `logging_hook`.
      "probabilities": tf.nn.softmax(logits, name="softmax_tensor")
  }
  if mode == tf.estimator.ModeKeys.PREDICT:
    return tf.estimator.EstimatorSpec(mode=mode, predictions=predictions)

  # Calculate Loss (for both TRAIN and EVAL modes)
  loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)

  # Configure the Training Op (for TRAIN mode)
  if mode == tf.estimator.ModeKeys.TRAIN:
    optimizer = tf.train.GradientDescentOptimizer(learning_rate=0.05)
    train_op = optimizer.minimize(
        loss=loss,
        global_step=tf.train.get_global_step())
    return tf.estimator.EstimatorSpec(mode=mode, loss=loss, train_op=train_op)

  # Add evaluation metrics (for EVAL mode)
  eval_metric_ops = {
      "accuracy": tf.metrics.accuracy(
          labels=labels, predictions=predictions["classes"])}
  return tf.estimator.EstimatorSpec(
      mode=mode, loss=loss, eval_metric_ops=eval_metric_ops)


def main(unused_argv):
  start = time.time()
  # Load training and eval data
  mnist = digits_data.read_data_sets("mnist")
  train_data = mnist.train.images  # Returns np.array
  train_labels = np.asarray(mnist.train.labels, dtype=np.int32)
  eval_data = mnist.test.images  # Returns np.array
  eval_labels = np.asarray(mnist.test.labels, dtype=np.int32)

  # Create the Estimator
  mnist_classifier = tf.estimator.Estimator(
      model_fn=cnn_model_fn, model_dir=tempfile.mkdtemp(prefix="mnist_convnet_model"))

  # Set up logging for predictions
  # Log the values in the "Softmax" tensor with label "probabilities"
  tensors_to_log = {"probabilities": "softmax_tensor"}
  logging_hook = tf.train.LoggingTensorHook(
      tensors=tensors_to_log, every_n_iter=50)

  # Train the model
  train_input_fn = tf.estimator.inputs.numpy_input_fn(
      x={"x": train_data},
      y=train_labels,
      batch_size=100,
      num_epochs=None,
      shuffle=True)
  mnist_classifier.train(
      input_fn=train_input_fn,
      steps=300,
      hooks=[logging_hook])

  # Evaluate the model and print results
  eval_input_fn = tf.estimator.inputs.numpy_input_fn(
      x={"x": eval_data},
      y=eval_labels,
      num_epochs=1,
      shuffle=False)
  eval_results = mnist_classifier.evaluate(input_fn=eval_input_fn)
  print(eval_results)
  # The loss of the untrained model, for comparison with the trained one.
  untrained = tf.estimator.Estimator(
      model_fn=cnn_model_fn, model_dir=tempfile.mkdtemp(prefix="mnist_convnet_untrained"))
  untrained.train(input_fn=train_input_fn, steps=1)
  first = untrained.evaluate(input_fn=eval_input_fn)
  print('RESULT loss_first=%.4f loss_last=%.4f accuracy=%.4f seconds=%.1f'
        % (first["loss"], eval_results["loss"], eval_results["accuracy"], time.time() - start))


if __name__ == "__main__":
  tf.app.run()

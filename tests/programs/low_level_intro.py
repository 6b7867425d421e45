# Follows the TF 1.x guide "Introduction to TensorFlow low-level APIs" (tensorflow/docs
# site/en/r1/guide/low_level_intro.md), section "Training": a tf.layers.Dense model fitted with
# tf.losses.mean_squared_error and GradientDescentOptimizer(0.01).
# Adapted: the first import line; the first and last loss are recorded for the RESULT line (the
# guide's earlier sections on TensorBoard, datasets and feature columns are not part of it).
import kernflow.core as tf

import time

start = time.time()
tf.set_random_seed(1)

x = tf.constant([[1], [2], [3], [4]], dtype=tf.float32)
y_true = tf.constant([[0], [-1], [-2], [-3]], dtype=tf.float32)

linear_model = tf.layers.Dense(units=1)

y_pred = linear_model(x)
loss = tf.losses.mean_squared_error(labels=y_true, predictions=y_pred)

optimizer = tf.train.GradientDescentOptimizer(0.01)
train = optimizer.minimize(loss)

init = tf.global_variables_initializer()

sess = tf.Session()
sess.run(init)
losses = []
for i in range(100):
  _, loss_value = sess.run((train, loss))
  losses.append(loss_value)
  print(loss_value)

print(sess.run(y_pred))
print('RESULT loss_first=%.4f loss_last=%.4f seconds=%.1f'
      % (losses[0], losses[-1], time.time() - start))

# Follows aymericdamien/TensorFlow-Examples, examples/2_BasicModels/logistic_regression.py (TF 1.x):
# softmax regression with a hand-written cross entropy (-sum(y*log(pred))), GradientDescentOptimizer.
# Adapted: the first import line; input_data reads scikit-learn's 8x8 digits offline (784 -> 64
# pixels); 12 batches per epoch instead of 550, so learning rate 0.1 instead of 0.01; the average
# cost of the first and last epoch is recorded for the RESULT line.
'''
A logistic regression learning algorithm example using TensorFlow library.
This example is using the MNIST database of handwritten digits
(http://yann.lecun.com/exdb/mnist/)

Author: Aymeric Damien
Project: https://github.com/aymericdamien/TensorFlow-Examples/
'''
import kernflow.core as tf

import time

# Import MNIST data
import digits_data as input_data
mnist = input_data.read_data_sets("/tmp/data/", one_hot=True)

start = time.time()
# Parameters
learning_rate = 0.1
training_epochs = 25
batch_size = 100
display_step = 1

# tf Graph Input
x = tf.placeholder(tf.float32, [None, 64])  # mnist data image of shape 8*8=64
y = tf.placeholder(tf.float32, [None, 10])  # 0-9 digits recognition => 10 classes

# Set model weights
W = tf.Variable(tf.zeros([64, 10]))
b = tf.Variable(tf.zeros([10]))

# Construct model
pred = tf.nn.softmax(tf.matmul(x, W) + b)  # Softmax

# Minimize error using cross entropy
cost = tf.reduce_mean(-tf.reduce_sum(y*tf.log(pred), reduction_indices=1))
# Gradient Descent
optimizer = tf.train.GradientDescentOptimizer(learning_rate).minimize(cost)

# Initialize the variables (i.e. assign their default value)
init = tf.global_variables_initializer()

costs = []
# Start training
with tf.Session() as sess:

    # Run the initializer
    sess.run(init)

    # Training cycle
    for epoch in range(training_epochs):
        avg_cost = 0.
        total_batch = int(mnist.train.num_examples/batch_size)
        # Loop over all batches
        for i in range(total_batch):
            batch_xs, batch_ys = mnist.train.next_batch(batch_size)
            # Run optimization op (backprop) and cost op (to get loss value)
            _, c = sess.run([optimizer, cost], feed_dict={x: batch_xs,
                                                          y: batch_ys})
            # Compute average loss
            avg_cost += c / total_batch
        costs.append(avg_cost)
        # Display logs per epoch step
        if (epoch+1) % display_step == 0:
            print("Epoch:", '%04d' % (epoch+1), "cost=", "{:.9f}".format(avg_cost))

    print("Optimization Finished!")

    # Test model
    correct_prediction = tf.equal(tf.argmax(pred, 1), tf.argmax(y, 1))
    # Calculate accuracy
    accuracy = tf.reduce_mean(tf.cast(correct_prediction, tf.float32))
    acc = accuracy.eval({x: mnist.test.images[:3000], y: mnist.test.labels[:3000]})
    print("Accuracy:", acc)

print('RESULT loss_first=%.4f loss_last=%.4f accuracy=%.4f seconds=%.1f'
      % (costs[0], costs[-1], acc, time.time() - start))

# Follows aymericdamien/TensorFlow-Examples, examples/3_NeuralNetworks/gan.py (TF 1.x): a generator
# and a discriminator built from raw Variables with glorot_init, two AdamOptimizers with var_list.
# Adapted: the first import line; tf.set_random_seed(1) and np.random.seed(1); input_data reads
# scikit-learn's 8x8 digits offline (image_dim 784 -> 64); 3000 steps instead of 100000; the
# matplotlib display of generated images is replaced by the discriminator's mean output on
# generated and real test images. For the RESULT line, loss is the generator's distance from the
# data: the squared distance between the mean generated image and the mean test image, measured
# before and after training (a GAN's own losses need not fall).
""" Generative Adversarial Networks (GAN).

Using generative adversarial networks (GAN) to generate digit images from a
noise distribution.

Author: Aymeric Damien
Project: https://github.com/aymericdamien/TensorFlow-Examples/
"""

from __future__ import division, print_function, absolute_import

import numpy as np
import kernflow.core as tf

import time

# Import MNIST data
import digits_data as input_data
mnist = input_data.read_data_sets("/tmp/data/", one_hot=True)

tf.set_random_seed(1)
np.random.seed(1)
start = time.time()
# Training Params
num_steps = 3000
batch_size = 128
learning_rate = 0.0002

# Network Params
image_dim = 64  # 8*8 pixels
gen_hidden_dim = 256
disc_hidden_dim = 256
noise_dim = 100  # Noise data points


# A custom initialization (see Xavier Glorot init)
def glorot_init(shape):
    return tf.random_normal(shape=shape, stddev=1. / tf.sqrt(shape[0] / 2.))


# Store layers weight & bias
weights = {
    'gen_hidden1': tf.Variable(glorot_init([noise_dim, gen_hidden_dim])),
    'gen_out': tf.Variable(glorot_init([gen_hidden_dim, image_dim])),
    'disc_hidden1': tf.Variable(glorot_init([image_dim, disc_hidden_dim])),
    'disc_out': tf.Variable(glorot_init([disc_hidden_dim, 1])),
}
biases = {
    'gen_hidden1': tf.Variable(tf.zeros([gen_hidden_dim])),
    'gen_out': tf.Variable(tf.zeros([image_dim])),
    'disc_hidden1': tf.Variable(tf.zeros([disc_hidden_dim])),
    'disc_out': tf.Variable(tf.zeros([1])),
}


# Generator
def generator(x):
    hidden_layer = tf.matmul(x, weights['gen_hidden1'])
    hidden_layer = tf.add(hidden_layer, biases['gen_hidden1'])
    hidden_layer = tf.nn.relu(hidden_layer)
    out_layer = tf.matmul(hidden_layer, weights['gen_out'])
    out_layer = tf.add(out_layer, biases['gen_out'])
    out_layer = tf.nn.sigmoid(out_layer)
    return out_layer


# Discriminator
def discriminator(x):
    hidden_layer = tf.matmul(x, weights['disc_hidden1'])
    hidden_layer = tf.add(hidden_layer, biases['disc_hidden1'])
    hidden_layer = tf.nn.relu(hidden_layer)
    out_layer = tf.matmul(hidden_layer, weights['disc_out'])
    out_layer = tf.add(out_layer, biases['disc_out'])
    out_layer = tf.nn.sigmoid(out_layer)
    return out_layer


# Build Networks
# Network Inputs
gen_input = tf.placeholder(tf.float32, shape=[None, noise_dim], name='input_noise')
disc_input = tf.placeholder(tf.float32, shape=[None, image_dim], name='disc_input')

# Build Generator Network
gen_sample = generator(gen_input)

# Build 2 Discriminator Networks (one from noise input, one from generated samples)
disc_real = discriminator(disc_input)
disc_fake = discriminator(gen_sample)

# Build Loss
gen_loss = -tf.reduce_mean(tf.log(disc_fake))
disc_loss = -tf.reduce_mean(tf.log(disc_real) + tf.log(1. - disc_fake))

# Build Optimizers
optimizer_gen = tf.train.AdamOptimizer(learning_rate=learning_rate)
optimizer_disc = tf.train.AdamOptimizer(learning_rate=learning_rate)

# Training Variables for each optimizer
# By default in TensorFlow, all variables are updated by each optimizer, so we
# need to precise for each one of them the specific variables to update.
# Generator Network Variables
gen_vars = [weights['gen_hidden1'], weights['gen_out'],
            biases['gen_hidden1'], biases['gen_out']]
# Discriminator Network Variables
disc_vars = [weights['disc_hidden1'], weights['disc_out'],
             biases['disc_hidden1'], biases['disc_out']]

# Create training operations
train_gen = optimizer_gen.minimize(gen_loss, var_list=gen_vars)
train_disc = optimizer_disc.minimize(disc_loss, var_list=disc_vars)

# Initialize the variables (i.e. assign their default value)
init = tf.global_variables_initializer()



def mean_image_distance(sess):
    z = np.random.uniform(-1., 1., size=[len(mnist.test.images), noise_dim])
    g = sess.run(gen_sample, feed_dict={gen_input: z})
    return float(((g.mean(0) - mnist.test.images.mean(0)) ** 2).sum())


# Start training
with tf.Session() as sess:

    # Run the initializer
    sess.run(init)
    distance_first = mean_image_distance(sess)

    for i in range(1, num_steps+1):
        # Prepare Data
        # Get the next batch of MNIST data (only images are needed, not labels)
        batch_x, _ = mnist.train.next_batch(batch_size)
        # Generate noise to feed to the generator
        z = np.random.uniform(-1., 1., size=[batch_size, noise_dim])

        # Train
        feed_dict = {disc_input: batch_x, gen_input: z}
        _, _, gl, dl = sess.run([train_gen, train_disc, gen_loss, disc_loss],
                                feed_dict=feed_dict)
        if i % 500 == 0 or i == 1:
            print('Step %i: Generator Loss: %f, Discriminator Loss: %f' % (i, gl, dl))

    # Testing
    # Generate images from noise, using the generator network, and ask the
    # discriminator about them and about real test images.
    z = np.random.uniform(-1., 1., size=[len(mnist.test.images), noise_dim])
    d_fake, d_real = sess.run([disc_fake, disc_real],
                              feed_dict={gen_input: z, disc_input: mnist.test.images})
    print('Discriminator output: generated %.3f, real %.3f' % (d_fake.mean(), d_real.mean()))
    distance_last = mean_image_distance(sess)

print('RESULT loss_first=%.4f loss_last=%.4f seconds=%.1f'
      % (distance_first, distance_last, time.time() - start))

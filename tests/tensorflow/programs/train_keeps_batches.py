# A TensorFlow training loop that keeps every batch it made in a list, as a script that logs its inputs
# might. scripts/gpu-validate.sh runs it on a lent GPU, tests/tensorflow on the simulated device.
import tensorflow as tf

w = tf.Variable(tf.random.normal((256, 256)))
seen = []
for step in range(40):
    x = tf.fill((512, 256), step / 40)
    with tf.GradientTape() as tape:
        loss = tf.reduce_mean(tf.matmul(x, w) ** 2)
    w.assign_sub(0.01 * tape.gradient(loss, w))
    seen.append(x)
print(float(loss))

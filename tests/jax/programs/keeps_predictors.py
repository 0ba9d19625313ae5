# A search over scales that keeps each trial's jitted predictor, to compare them on a test set at the
# end. Each predictor closes over the weights its trial made, so the list keeps every trial's weights.
import jax
import jax.numpy as jnp


def train(scale):
    weights = jnp.full((1024, 512), scale)
    for _ in range(3):
        weights = weights * 0.9
    return jax.jit(lambda x: jnp.tanh(x @ weights))


predictors = []
for trial in range(24):
    predict = train(0.01 * trial)
    predict(jnp.ones((8, 1024))).block_until_ready()
    predictors.append(predict)

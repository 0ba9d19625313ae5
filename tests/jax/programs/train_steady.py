# The same loop keeping nothing but its weights.
import jax
import jax.numpy as jnp


def loss(w, x, y):
    return jnp.mean((x @ w - y) ** 2)


step_gradient = jax.jit(jax.grad(loss))
w = jax.random.normal(jax.random.PRNGKey(0), (256, 256))
for step in range(40):
    x = jnp.full((512, 256), float(step))
    y = jnp.zeros((512, 256))
    w = w - 0.01 * step_gradient(w, x, y)
w.block_until_ready()

# A loop that keeps each step's pullback from jax.vjp, to take the gradients of the worst steps later.
# A pullback holds what the forward pass saved for it: the list keeps every step's activations.
import jax
import jax.numpy as jnp


def loss(w, x):
    return jnp.mean(jnp.tanh(x @ w) ** 2)


w = jnp.full((512, 512), 0.01)
pullbacks = []
for step in range(24):
    x = jnp.ones((1024, 512)) * step
    value, pullback = jax.vjp(loss, w, x)
    pullbacks.append((float(value), pullback))

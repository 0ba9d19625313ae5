# A hyperparameter search that runs each trial in a process of its own: XLA's pool, and whatever a
# trial keeps, goes with the trial's process, and the search itself never touches the GPU.
import json

import gpuleak


def trial(width):
    import jax.numpy as jnp

    w = jnp.ones((width, width))
    for _ in range(3):
        w = w @ w * 0.5
    return w.shape[0]


if __name__ == "__main__":
    for width in (64, 256):
        result = gpuleak.isolated(trial, width)
        run = gpuleak.last_isolated()
        print(json.dumps({"width": width, "result": result, "pid": run.pid, "trace": run.trace_path,
                          "diagnosis": run.process["diagnosis"]}))

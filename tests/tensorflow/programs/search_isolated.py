# The search of search_keeps_models.py with each trial in a process of its own (gpuleak.isolated): the
# trial's model, and whatever TensorFlow took of the device for it, go with the trial's process, and the
# search itself never touches the GPU. It keeps each trial's loss, not its model.
import json

import gpuleak


def trial(width):
    from search_keeps_models import build, features, targets

    model = build(width)
    history = model.fit(features, targets, epochs=1, batch_size=128, verbose=0)
    return float(history.history["loss"][-1])


if __name__ == "__main__":
    from search_keeps_models import WIDTHS

    for width in WIDTHS:
        loss = gpuleak.isolated(trial, width)
        run = gpuleak.last_isolated()
        print(json.dumps({"width": width, "loss": loss, "pid": run.pid, "trace": run.trace_path,
                          "diagnosis": run.process["diagnosis"]}), flush=True)

# A hyperparameter search in one process, as scripts written by hand do it: each trial builds a wider
# Keras model and trains it briefly, and the search keeps every model beside its loss, to pick the best
# at the end. TensorFlow frees a model's memory only when nothing refers to it any more, and the list of
# results still does. Each trial is a gpuleak.phase, so the report tells each one's share.
import gpuleak
import keras
import numpy as np

WIDTHS = range(2048, 5120, 512)
rng = np.random.default_rng(0)
features = rng.normal(size=(512, 64)).astype("float32")
targets = rng.normal(size=(512, 1)).astype("float32")


def build(width):
    model = keras.Sequential(
        [
            keras.Input((64,)),
            keras.layers.Dense(width, activation="relu"),
            keras.layers.Dense(width, activation="relu"),
            keras.layers.Dense(1),
        ]
    )
    model.compile(optimizer="adam", loss="mse")
    return model


def search():
    results = []
    for trial, width in enumerate(WIDTHS):
        with gpuleak.phase(f"trial {trial}"):
            model = build(width)
            history = model.fit(features, targets, epochs=1, batch_size=128, verbose=0)
            loss = history.history["loss"][-1]
            results.append((loss, width, model))
        print(f"trial {trial}: width {width}, loss {loss:.4f}", flush=True)
    return min(results, key=lambda result: result[0])


if __name__ == "__main__":
    best_loss, best_width, best_model = search()
    print(f"best: width {best_width}, loss {best_loss:.4f}")

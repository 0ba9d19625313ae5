"""What keeps GPU memory alive, in the ways training scripts keep it: each scenario holds memory as users'
code does, then asks gpuleak.why() and prints one JSON line of what it answered; then the scenario lets go,
and the line also says whether the memory PyTorch counts as allocated came back to what it was before
(why() keeps nothing alive).

usage: scenarios.py NAME... (all of them without a name)
"""

import json
import sys
import types

import gpuleak
import torch

device = "cuda"
STEPS = 12
EPOCH_STEPS = 40  # a running total's: an epoch of steps
torch.manual_seed(0)
model = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(device)
loss_fn = torch.nn.CrossEntropyLoss()


def batch():
    return torch.randn(512, 256, device=device), torch.randint(0, 10, (512,), device=device)


# cuBLAS's workspaces, one for the main thread and one for autograd's, which PyTorch keeps for the rest
# of the process: made before the scenarios, so that what each lets go of is all it made.
warm_x, warm_y = batch()
loss_fn(model(warm_x), warm_y).backward()
for parameter in model.parameters():
    parameter.grad = None
del warm_x, warm_y


def losses_append():
    global losses
    losses = []
    for _ in range(STEPS):
        x, y = batch()
        losses.append(loss_fn(model(x), y))


def total_loss_sum():
    global total_loss
    total_loss = 0
    for _ in range(STEPS):
        x, y = batch()
        total_loss += loss_fn(model(x), y)


def cache_by_step():
    global cache
    cache = {}
    for step in range(STEPS):
        x, _ = batch()
        with torch.no_grad():
            cache[step] = model[0](x)


def on_step(hidden):
    return lambda: hidden.sum()


def closures():
    global callbacks
    callbacks = []
    for _ in range(STEPS):
        x, _ = batch()
        with torch.no_grad():
            callbacks.append(on_step(model[0](x)))


def slices():
    global kept
    kept = []
    for _ in range(STEPS):
        big = torch.randn(1024, 1024, device=device)
        kept.append(big[:4])


def evaluate():
    activations = [model[0](batch()[0]) for _ in range(STEPS)]
    raise ValueError("a bad batch after %d" % len(activations))


def traceback_kept():
    # What an interactive session does with an exception it shows: the traceback stays in sys.
    try:
        evaluate()
    except ValueError as error:
        sys.last_traceback = error.__traceback__


def search():
    global results
    results = []
    for learning_rate in (0.1, 0.01, 0.001):
        trial = torch.nn.Sequential(torch.nn.Linear(256, 1024), torch.nn.ReLU(), torch.nn.Linear(1024, 10)).to(device)
        results.append((learning_rate, trial))


def failed_search():
    # A search in a function that keeps each trial's model beside its score, whose widest trial fails;
    # the session keeps the traceback, whose frame holds both the list and the failing trial's model,
    # larger than any one model in the list but not than the list.
    def trials():
        results = []
        for width in (1024, 1280, 1536, 1792):
            model = torch.nn.Linear(width, width, bias=False).to(device)
            if width == 1792:
                raise RuntimeError("the widest trial failed")
            results.append((width, model))

    try:
        trials()
    except RuntimeError as error:
        sys.last_traceback = error.__traceback__


def running_total():
    global running_total_loss
    running_total_loss = 0
    optimizer = torch.optim.SGD(model.parameters(), lr=0.01)
    for _ in range(EPOCH_STEPS):
        x, y = batch()
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()
        running_total_loss += loss


class Recorder:
    """A class of the script's own whose attribute keeps each step's loss, kept by a library's object (as a
    LightningModule is by its Trainer)."""

    def __init__(self):
        self.step_losses = []

    def step(self, x, y):
        loss = loss_fn(model(x), y)
        self.step_losses.append(loss)
        return loss


def attribute():
    global trainer
    trainer = types.SimpleNamespace(module=Recorder())
    for _ in range(STEPS):
        trainer.module.step(*batch())


def outputs_kept():
    global history
    history = []
    for _ in range(STEPS):
        x, y = batch()
        logits = model(x)
        history.append({"loss": loss_fn(logits, y), "logits": logits})


def correct():
    global optimizer
    optimizer = torch.optim.Adam(model.parameters())
    for _ in range(STEPS):
        x, y = batch()
        loss = loss_fn(model(x), y)
        optimizer.zero_grad()
        loss.backward()
        optimizer.step()


SCENARIOS = {
    "losses_append": (losses_append, ["losses"]),
    "total_loss": (total_loss_sum, ["total_loss"]),
    "cache": (cache_by_step, ["cache"]),
    "closures": (closures, ["callbacks"]),
    "slices": (slices, ["kept"]),
    "traceback": (traceback_kept, []),
    "search": (search, ["results"]),
    "failed_search": (failed_search, []),
    "running_total": (running_total, ["running_total_loss"]),
    "attribute": (attribute, ["trainer"]),
    "outputs": (outputs_kept, ["history"]),
    "correct": (correct, ["optimizer"]),
}

for name in sys.argv[1:] or SCENARIOS:
    run, made = SCENARIOS[name]
    before = torch.cuda.memory_allocated()
    run()
    answer = gpuleak.why()
    line = {
        "scenario": name,
        "text": answer.text,
        "problem": answer.problem,
        "seconds": answer.seconds,
        "holders": [
            {
                "root": holder.root,
                "kind": holder.kind,
                "bytes": holder.bytes,
                "tensors": holder.tensors,
                "path": holder.path,
                "through": holder.through,
                "owner": holder.owner,
                "models": holder.models,
                "sites": [answer.sites[site].where for site in holder.sites],
                "graph": None if holder.graph is None else [holder.graph.passes, holder.graph.spent_passes],
            }
            for holder in answer.holders
        ],
    }
    del answer
    for variable in made:
        del globals()[variable]
    sys.last_traceback = None
    if name in ("running_total", "correct"):
        for parameter in model.parameters():
            parameter.grad = None
    line["released"] = torch.cuda.memory_allocated() == before
    print(json.dumps(line), flush=True)

"""Runs cells in a new kernel of an installed kernelspec through jupyter_client, as a notebook would, and
prints one JSON line per cell: its status ("ok" or "error") and the text of its outputs. Run by an
interpreter that has jupyter_client: tests/torch/test_notebook.py runs it with the PyTorch environment's
(scripts/setup-torch.sh), whose kernel it starts. test_jupyter_kernel.py takes `add_output` from here.

    python run_cells.py KERNEL_NAME < cells.json      (a JSON list of the cells' sources)

A cell whose source starts with KILLS is one that kills its kernel: it is sent, and its line says "died"
once the kernel is gone; the cells after it run in the kernel Jupyter starts next, as after a restart.
"""

import json
import sys
import time

import jupyter_client

TIMEOUT = 120
KILLS = "# kills its kernel"


def add_output(texts, message):
    """Appends the text a notebook shows for an output message of a cell (a stream, a result, an error)."""
    content = message["content"]
    if message["msg_type"] == "stream":
        texts.append(content["text"])
    elif message["msg_type"] in ("execute_result", "display_data"):
        texts.append(content["data"].get("text/plain", ""))
    elif message["msg_type"] == "error":
        texts.append("\n".join(content["traceback"]))


def main():
    cells = json.load(sys.stdin)
    # A slow shutdown on a loaded machine must not read as a kill: wait as long as a cell may take.
    manager = jupyter_client.KernelManager(kernel_name=sys.argv[1], shutdown_wait_time=TIMEOUT)
    manager.start_kernel()
    client = manager.client()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=TIMEOUT)
        for code in cells:
            if code.startswith(KILLS):
                client.execute(code)
                deadline = time.monotonic() + TIMEOUT
                while manager.is_alive() and time.monotonic() < deadline:
                    time.sleep(0.1)
                print(json.dumps({"status": "alive" if manager.is_alive() else "died", "text": ""}), flush=True)
                client.stop_channels()
                manager.restart_kernel(now=True)
                client = manager.client()
                client.start_channels()
                client.wait_for_ready(timeout=TIMEOUT)
                continue
            texts = []
            reply = client.execute_interactive(
                code, output_hook=lambda message: add_output(texts, message), timeout=TIMEOUT
            )
            print(json.dumps({"status": reply["content"]["status"], "text": "".join(texts)}), flush=True)
    finally:
        client.stop_channels()
        manager.shutdown_kernel(now=False)


if __name__ == "__main__":
    main()

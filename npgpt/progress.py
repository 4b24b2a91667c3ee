"""Progress reporting for long runs: a tqdm bar when tqdm is installed (the `train` extra),
plain log lines otherwise; the loss-curve PNG when matplotlib is installed (`plots`); and the
Ctrl-C flag that lets a long loop save its state and stop cleanly."""

import math
import signal
import sys
import threading


class Progress:
    """A bar over `total` iterations starting at `initial`, showing loss, lr and tokens/s."""

    def __init__(self, total, initial=0, enabled=True, log=print):
        self.log, self.n, self.total, self.bar = log, initial, total, None
        self.every = max(total // 20, 1)
        if enabled:
            try:
                from tqdm import tqdm
            except ImportError:
                tqdm = None
            if tqdm is not None:
                self.bar = tqdm(total=total, initial=initial, unit="it", dynamic_ncols=True, file=sys.stderr)
        self.enabled = enabled

    def update(self, loss, lr, tok_s):
        self.n += 1
        if self.bar is not None:
            if self.n >= self.total:  # the final state is drawn by close(), once
                self.bar.mininterval = math.inf
            self.bar.set_postfix(loss=f"{loss:.4f}", lr=f"{lr:.2e}", tok_s=f"{tok_s:,.0f}", refresh=False)
            self.bar.update(1)
        elif self.enabled and (self.n % self.every == 0 or self.n == self.total):
            self.log(f"iter {self.n}/{self.total}: loss {loss:.4f}, lr {lr:.2e}, {tok_s:,.0f} tokens/s")

    def write(self, msg):
        """Print `msg` above the bar; once the bar is full, close it first (tqdm would draw the
        full bar again below the message, and close() once more)."""
        if self.bar is not None and self.n >= self.total:
            self.close()
        if self.bar is not None:
            self.bar.write(msg)
        else:
            self.log(msg)

    def close(self):
        """Draw the final state and leave the bar; later calls do nothing."""
        if self.bar is not None:
            self.bar.close()
            self.bar = None


def plot_unavailable():
    """Why no plot can be drawn (a one-line reason), or None when matplotlib is importable."""
    try:
        import matplotlib  # noqa: F401
    except ImportError:
        return "matplotlib is not installed (pip install 'npgpt[plots]')"
    return None


def save_loss_plot(curve, evals, path):
    """Plot the per-iteration training loss and the evaluated train/val losses; return the
    path, or None when matplotlib is not installed (plot_unavailable() says so) or there is
    nothing to plot."""
    if plot_unavailable() is not None or (not curve and not evals):
        return None
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4))
    if curve:
        ax.plot([c[0] for c in curve], [c[1] for c in curve], lw=0.6, alpha=0.5, label="train (batch)")
    if evals:
        its = [e[0] for e in evals]
        ax.plot(its, [e[1] for e in evals], "o-", label="train (eval)")
        ax.plot(its, [e[2] for e in evals], "s-", label="val (eval)")
    ax.set_xlabel("iteration")
    ax.set_ylabel("cross-entropy loss")
    ax.legend()
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return str(path)


def stop_flag():
    """-> (flag, previous handler): the first Ctrl-C sets the flag (a loop checks it, saves and
    stops); a second one raises KeyboardInterrupt. Restore the handler with signal.signal."""
    flag = threading.Event()
    if threading.current_thread() is not threading.main_thread():
        return flag, None

    def handler(signum, frame):
        if flag.is_set():
            raise KeyboardInterrupt
        flag.set()

    return flag, signal.signal(signal.SIGINT, handler)

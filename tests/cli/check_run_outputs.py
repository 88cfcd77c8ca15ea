#!/usr/bin/env python3
"""Checks a run's --report_to files against its metrics.jsonl with independent readers.

  tensorboard  tb/ read by TensorBoard's own EventAccumulator: the set of scalar tags, and every
               (step, value) of every tag, equal metrics.jsonl's values (as float32, what a
               Summary simple_value holds); one value per step; the "config" text once per run
               start, the first one equal to --config-text indented as Markdown code.
  truncated    the newest event file cut inside its last record, at several places, still reads
               back everything but that record.
  csv          metrics.csv byte for byte as a CSV logger following Lightning's rules writes the
               same values (sorted union of the names, `epoch` on every row, the file rewritten
               under the wider header when a name first appears, Python's csv module).
  svg          run.svg is well-formed XML; each curve's polyline has a point per logged value,
               and one mark per precision switch and per logged step after skipped steps.

Usage: check_run_outputs.py RUN_DIR CHECK[,CHECK...] [--config-text FILE]
Prints "ok: ..." and exits 0, or names the first difference and exits 1.
"""
import argparse
import csv
import io
import json
import math
import os
import shutil
import struct
import sys
import tempfile
import xml.etree.ElementTree as ET

COUNTS = {"epoch", "step", "memory/peak_bytes", "amp/overflows", "amp/skipped_steps",
          "amp/growth_tracker", "amp/hysteresis", "precision/stage"}


def fail(message):
    print(f"FAIL: {message}")
    sys.exit(1)


def read_jsonl(run_dir):
    with open(os.path.join(run_dir, "metrics.jsonl")) as f:
        return [json.loads(line) for line in f if line.strip()]


def finite(value):
    return value is not None and math.isfinite(value)


def language_model(lines):
    return any(l.get("tokens_per_sec") != l.get("samples_per_sec") for l in lines if "loss" in l)


def logged_values(lines):
    """Each metrics.jsonl line as the named values ampt logs for it (the names of scalars.h)."""
    lm = language_model(lines)
    mfu_known = any(finite(l.get("mfu")) and l["mfu"] > 0 for l in lines if "loss" in l)
    rows = []
    for l in lines:
        row = {}
        if "loss" in l:
            row.update({"train/loss": l["loss"], "train/lr": l["lr"], "train/grad_norm": l["grad_norm"],
                        "epoch": l["epoch"], "memory/peak_bytes": l["peak_memory_bytes"],
                        "amp/overflows": l["overflows"], "amp/skipped_steps": l["skipped_steps"]})
            if lm:
                row["perf/tokens_per_sec"] = l["tokens_per_sec"]
            else:
                row["perf/samples_per_sec"] = l["samples_per_sec"]
            if mfu_known:
                row["perf/mfu"] = l["mfu"]
            if l["grad_underflow"] is not None:
                row["amp/grad_underflow"] = l["grad_underflow"]
            if l["loss_scaling"]:
                row["amp/loss_scale"] = l["scale"]
                row["amp/growth_tracker"] = l["growth_tracker"]
            if "hysteresis" in l:
                row["amp/hysteresis"] = l["hysteresis"]
        elif "val_loss" in l:
            row["val/loss"] = l["val_loss"]
            if "val_perplexity" in l:
                row["val/perplexity"] = l["val_perplexity"]
            else:
                row["val/accuracy"] = l["val_accuracy"]
        elif l.get("event") == "precision_switch":
            row["precision/stage"] = l["stage"]
        elif l.get("event") == "checkpoint":
            continue  # the console's and metrics.jsonl's only
        else:
            fail(f"metrics.jsonl line of an unknown kind: {l}")
        rows.append((l["step"], row, l.get("epoch")))
    return rows


def as_float32(value):
    return struct.unpack("f", struct.pack("f", value))[0]


def same_scalar(expected, got):
    if expected is None or not math.isfinite(expected):
        return not math.isfinite(got)  # null in metrics.jsonl: a non-finite value
    return as_float32(float(expected)) == got


def load_tensorboard(tb_dir):
    from tensorboard.backend.event_processing import event_accumulator as ea
    acc = ea.EventAccumulator(tb_dir, size_guidance={ea.SCALARS: 0, ea.TENSORS: 0})
    acc.Reload()
    return acc


def scalars_of(acc):
    return {tag: [(e.step, e.value) for e in acc.Scalars(tag)] for tag in acc.Tags()["scalars"]}


def check_scalars(got, expected_rows):
    expected = {}
    for step, row, _ in expected_rows:
        for tag, value in row.items():
            expected.setdefault(tag, []).append((step, value))
    if set(got) != set(expected):
        fail(f"TensorBoard scalar tags {sorted(got)} != metrics.jsonl's {sorted(expected)}")
    values = 0
    for tag, want in expected.items():
        have = got[tag]
        steps = [s for s, _ in have]
        if len(set(steps)) != len(steps):
            fail(f"tag {tag} has more than one value at a step: {steps}")
        if [s for s, _ in want] != steps:
            fail(f"tag {tag}: steps {steps} != metrics.jsonl's {[s for s, _ in want]}")
        for (step, w), (_, h) in zip(want, have):
            if not same_scalar(w, h):
                fail(f"tag {tag} at step {step}: {h} != metrics.jsonl's {w} (as float32)")
            values += 1
    return values


def check_tensorboard(run_dir, lines, config_text):
    acc = load_tensorboard(os.path.join(run_dir, "tb"))
    values = check_scalars(scalars_of(acc), logged_values(lines))
    configs = acc.Tensors("config")
    steps = [e.step for e in configs]
    if len(set(steps)) != len(steps):
        fail(f"the config text has more than one value at a step: {steps}")
    if config_text is not None:
        text = configs[0].tensor_proto.string_val[0].decode()
        want = "".join("    " + line + "\n" for line in config_text.splitlines())
        if text != want:
            fail(f"the config text differs from ampt config's:\n{text}\n---\n{want}")
    return f"{len(acc.Tags()['scalars'])} tags, {values} values, config at steps {steps}"


def check_truncated(run_dir):
    from tensorboard.backend.event_processing.event_file_loader import RawEventFileLoader
    from tensorboard.compat.proto import event_pb2
    tb_dir = os.path.join(run_dir, "tb")
    newest = sorted(f for f in os.listdir(tb_dir) if "tfevents" in f)[-1]
    # repr: a NaN read back equals the NaN written
    intact = {tag: [(s, repr(v)) for s, v in values]
              for tag, values in scalars_of(load_tensorboard(tb_dir)).items()}
    records = list(RawEventFileLoader(os.path.join(tb_dir, newest)).Load())
    last = event_pb2.Event.FromString(records[-1])
    if not last.summary.value:
        fail("the last event holds no scalars to lose")
    lost = {v.tag for v in last.summary.value}
    want = {tag: [(s, v) for s, v in values if not (tag in lost and s == last.step)]
            for tag, values in intact.items()}
    want = {tag: values for tag, values in want.items() if values}
    size = os.path.getsize(os.path.join(tb_dir, newest))
    record = 16 + len(records[-1])
    cuts = [size - 1, size - 4, size - record + 5, size - record + 12 + len(records[-1]) // 2]
    for cut in cuts:
        with tempfile.TemporaryDirectory() as copy:
            path = os.path.join(copy, newest)
            shutil.copyfile(os.path.join(tb_dir, newest), path)
            os.truncate(path, cut)
            got = {tag: [(s, repr(v)) for s, v in values]
                   for tag, values in scalars_of(load_tensorboard(copy)).items()}
            if got != want:
                fail(f"cut at byte {cut} of {size}: read back {got}, expected {want}")
    return f"cut at bytes {cuts} of {size}: all but the last event ({sorted(lost)} at step {last.step}) read back"


class LightningStyleCsv:
    """A CSV logger that follows Lightning's rules, fed the rows ampt logs."""

    def __init__(self):
        self.keys = []
        self.text = None

    def log(self, row, step):
        row = dict(row, step=step)
        new = set(row) - set(self.keys)
        self.keys = sorted(set(self.keys) | new)
        out = io.StringIO(newline="")
        if self.text is not None and new:
            old = list(csv.DictReader(io.StringIO(self.text, newline="")))
            writer = csv.DictWriter(out, fieldnames=self.keys)
            writer.writeheader()
            writer.writerows(old)
            self.text = out.getvalue()
            out = io.StringIO(newline="")
        writer = csv.DictWriter(out, fieldnames=self.keys)
        if self.text is None:
            writer.writeheader()
            self.text = ""
        writer.writerow(row)
        self.text += out.getvalue()


# metrics.jsonl writes every non-finite value as null: the CSV cell may be any of them.
NONFINITE = "<non-finite>"


def same_csv(text, reference):
    lines, want = text.split("\r\n"), reference.split("\r\n")
    if len(lines) != len(want):
        return False
    for line, wanted in zip(lines, want):
        cells, wanted_cells = line.split(","), wanted.split(",")
        if len(cells) != len(wanted_cells):
            return False
        for cell, w in zip(cells, wanted_cells):
            if cell != w and not (w == NONFINITE and cell in ("nan", "inf", "-inf")):
                return False
    return True


def check_csv(run_dir, lines):
    reference = LightningStyleCsv()
    epoch = 0
    for step, row, line_epoch in logged_values(lines):
        # An evaluation line has no epoch: it is the epoch of the step logged before it.
        epoch = line_epoch if line_epoch is not None else epoch
        typed = {k: (int(v) if k in COUNTS else NONFINITE if v is None else float(v))
                 for k, v in row.items()}
        typed.setdefault("epoch", epoch)
        reference.log(typed, step)
    with open(os.path.join(run_dir, "metrics.csv"), newline="") as f:
        text = f.read()
    if not same_csv(text, reference.text):
        fail(f"metrics.csv differs from the Lightning-style reference:\n{text}\n---\n{reference.text}")
    rows = len(reference.text.splitlines()) - 1
    return f"{rows} rows, columns {reference.keys}"


def check_svg(run_dir, lines):
    root = ET.parse(os.path.join(run_dir, "run.svg")).getroot()
    ns = "{http://www.w3.org/2000/svg}"
    steps = [l for l in lines if "loss" in l]
    speed = "tokens_per_sec" if language_model(lines) else "samples_per_sec"
    want = {
        "train-loss": sum(finite(l["loss"]) for l in steps),
        "val-loss": sum(finite(l.get("val_loss")) for l in lines),
        "lr": sum(finite(l["lr"]) for l in steps),
        "loss-scale": sum(bool(l["loss_scaling"]) and finite(l["scale"]) for l in steps),
        "throughput": sum(finite(l[speed]) for l in steps),
    }
    got = {}
    for polyline in root.iter(ns + "polyline"):
        got[polyline.get("id")] = len(polyline.get("points").split())
    want_lines = {k: v for k, v in want.items() if v > 0}
    if got != want_lines:
        fail(f"run.svg polylines have {got} points, metrics.jsonl logs {want_lines}")
    skipped, before = 0, 0
    for l in steps:
        skipped += l["skipped_steps"] > before
        before = l["skipped_steps"]
    switches = sum(l.get("event") == "precision_switch" for l in lines)
    groups = {g.get("id"): len(g.findall(ns + "path")) for g in root.iter(ns + "g")}
    if groups != {"skipped-steps": skipped, "precision-switches": switches}:
        fail(f"run.svg marks {groups}, metrics.jsonl has {skipped} logged steps after skipped "
             f"steps and {switches} precision switches")
    return f"polylines {got}, marks {groups}"


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("run_dir")
    parser.add_argument("checks")
    parser.add_argument("--config-text")
    args = parser.parse_args()
    lines = read_jsonl(args.run_dir)
    config_text = None
    if args.config_text:
        with open(args.config_text) as f:
            config_text = f.read()
    for check in args.checks.split(","):
        if check == "tensorboard":
            result = check_tensorboard(args.run_dir, lines, config_text)
        elif check == "truncated":
            result = check_truncated(args.run_dir)
        elif check == "csv":
            result = check_csv(args.run_dir, lines)
        elif check == "svg":
            result = check_svg(args.run_dir, lines)
        else:
            fail(f"unknown check {check}")
        print(f"ok: {check}: {result}")


if __name__ == "__main__":
    main()

"""What `datasets` itself writes and reads: the reference for ampt's Parquet and Arrow records.

    datasets_reference.py make DIR

For each record shape ampt reads (documents, messages, ShareGPT conversations, Alpaca, standard
and conversational preference pairs, RL prompts) DIR/<shape>/ gets:
  train-0000{0,1}-of-00002.parquet  Dataset.to_parquet of the two halves, row groups of 2 rows
  saved/                            Dataset.save_to_disk(num_shards=2): Arrow IPC streams
  reference.jsonl                   the rows as load_dataset("parquet", ...) gives them, one JSON
                                    object a line (load_from_disk gives the same: checked here)
and DIR/hub/ a Hub snapshot's layout (data/train-*.parquet, data/test-*.parquet) of the messages.
"""
import json
import sys
from pathlib import Path

import datasets
import pyarrow.parquet as pq

datasets.disable_progress_bars()

SHAPES = {
    "text": [{"text": t, "id": i} for i, t in enumerate([
        "Once upon a time", "a second document, ünïcödé and 日本語", "", "three\nlines\nhere",
        "x" * 50, "tabs\tand \"quotes\"", "<|endoftext|> stays text", "end"])],
    "messages": [
        {"messages": [{"role": "user", "content": f"question {i}?"},
                      {"role": "assistant", "content": f"answer {i}."}]}
        for i in range(6)
    ] + [{"messages": [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi"},
                       {"role": "assistant", "content": "hello"}, {"role": "user", "content": "more"},
                       {"role": "assistant", "content": "done"}]}],
    "conversations": [
        {"conversations": [{"from": "human", "value": f"h{i}"}, {"from": "gpt", "value": f"g{i} " * i}]}
        for i in range(7)
    ],
    "alpaca": [{"instruction": f"do {i}", "input": "" if i % 2 else f"with {i}", "output": f"done {i}"}
               for i in range(7)],
    "preference": [{"prompt": f"The cat and {i}", "chosen": f" the dog {i}.", "rejected": f" a fish {i}."}
                   for i in range(7)],
    "conversational_preference": [
        {"prompt": [{"role": "user", "content": f"pick {i}"}],
         "chosen": [{"role": "assistant", "content": f"good {i}"}],
         "rejected": [{"role": "assistant", "content": f"bad {i}"}]}
        for i in range(7)
    ],
    "prompts": [{"prompt": f"{i}+{i}=", "answer": str(2 * i), "level": i % 3} for i in range(7)],
}


def rows(dataset):
    return [dict(row) for row in dataset]


def make(out):
    out = Path(out)
    for shape, records in SHAPES.items():
        d = out / shape
        d.mkdir(parents=True, exist_ok=True)
        full = datasets.Dataset.from_list(records)
        paths = []
        for i in range(2):
            path = d / f"train-0000{i}-of-00002.parquet"
            full.shard(2, i, contiguous=True).to_parquet(str(path), batch_size=2)
            assert pq.ParquetFile(path).metadata.num_row_groups >= 2, path
            paths.append(str(path))
        loaded = datasets.load_dataset("parquet", data_files=paths, split="train",
                                       cache_dir=str(out / ".cache"))
        full.save_to_disk(str(d / "saved"), num_shards=2)
        assert rows(datasets.load_from_disk(str(d / "saved"))) == rows(loaded), shape
        with open(d / "reference.jsonl", "w") as f:
            for row in rows(loaded):
                f.write(json.dumps(row, ensure_ascii=False) + "\n")
    hub = out / "hub" / "data"
    hub.mkdir(parents=True, exist_ok=True)
    messages = datasets.Dataset.from_list(SHAPES["messages"])
    messages.select(range(4)).to_parquet(str(hub / "train-00000-of-00002.parquet"))
    messages.select(range(4, 6)).to_parquet(str(hub / "train-00001-of-00002.parquet"))
    messages.select(range(6, 7)).to_parquet(str(hub / "test-00000-of-00001.parquet"))


if __name__ == "__main__":
    if len(sys.argv) != 3 or sys.argv[1] != "make":
        sys.exit(__doc__)
    make(sys.argv[2])

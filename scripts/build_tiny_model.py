"""Write the tiny Qwen2-architecture test model (seconds, deterministic): python scripts/build_tiny_model.py OUT."""

from __future__ import annotations

import argparse
import json

from loop_agents.tiny_model import TinyModelSpec, build_tiny_model, describe


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("out", help="output directory")
    parser.add_argument("--chat-template", default="qwen2_5", choices=["qwen2_5", "qwen3"])
    parser.add_argument("--hidden-size", type=int, default=TinyModelSpec.hidden_size)
    parser.add_argument("--layers", type=int, default=TinyModelSpec.num_layers)
    parser.add_argument("--heads", type=int, default=TinyModelSpec.num_heads)
    parser.add_argument("--intermediate-size", type=int, default=TinyModelSpec.intermediate_size)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    spec = TinyModelSpec(
        hidden_size=args.hidden_size,
        num_layers=args.layers,
        num_heads=args.heads,
        num_kv_heads=1,
        intermediate_size=args.intermediate_size,
        chat_template=args.chat_template,
        seed=args.seed,
    )
    print(json.dumps(describe(build_tiny_model(args.out, spec))))


if __name__ == "__main__":
    main()

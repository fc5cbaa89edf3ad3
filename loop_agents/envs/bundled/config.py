"""Settings of the bundled gem hunt environment (`env.options` when `env.name=bundled`)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class BundledEnvConfig:
    spare_moves: int = 1  # moves allowed beyond the optimal episode length (0 = no mistake tolerated)
    demo_noise: float = 0.3  # warm-start demonstrations: probability that an action is a random wrong one
    demo_count: int = 2000  # warm-start demonstrations generated from the train split
    demo_seed: int = 0  # seed of the demonstrations' task choice and noise
    # weight of the answer's code symbols in the warm start's token loss (1 = every action token alike); the
    # copy of the gem's code is the skill whose absence stalls a warm start (docs/log/demo.md)
    demo_code_weight: float = 1.0
    # names and the code in double quotes in the observations (GemHuntGame.quoted); unset: quoted exactly when the
    # agent calls the gem hunt's tools (`agent=tools`, an agent program), whose JSON arguments quote them
    quoted_names: bool | None = None

    def __post_init__(self) -> None:
        if self.spare_moves < 0:
            raise ValueError(f"env.options.spare_moves must be >= 0, got {self.spare_moves}")
        if not 0.0 <= self.demo_noise <= 1.0:
            raise ValueError(f"env.options.demo_noise must be in [0, 1], got {self.demo_noise}")
        if not self.demo_code_weight > 0:
            raise ValueError(f"env.options.demo_code_weight must be > 0, got {self.demo_code_weight}")
        if self.demo_count < 1:
            raise ValueError(f"env.options.demo_count must be >= 1, got {self.demo_count}")

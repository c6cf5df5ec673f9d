"""The AnimeGamer MLLM (Mistral-7B + LoRA + projections) on transformers and peft."""

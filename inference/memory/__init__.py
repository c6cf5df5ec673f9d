"""Memory of a whole turn, predicted without the hardware and measured on it.

- `live`: a dispatch-level count of live tensor bytes (every aten op's outputs, by storage, freed
  when the storage is), with the CUDA caching allocator's rounding; the same count runs on real
  tensors (a measurement) and on fake ones (a prediction), so the two are comparable.
- `fake_models`: the released architectures at full size with fake weights on any device
  (built on the meta device, then given fake storage): no memory, no download, no GPU.
- `plan`: a turn's stages traced through the real model code at full size, per memory mode and
  number of sessions, with the weights resident at each stage; which mode fits a GPU.
"""

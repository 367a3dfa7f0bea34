// Package safetensors reads and writes the safetensors format used by Hugging
// Face checkpoints.
//
// Layout of a file:
//
//	[0, 8)        N, the header length, unsigned 64-bit little-endian
//	[8, 8+N)      a UTF-8 JSON object: tensor name → {"dtype", "shape",
//	              "data_offsets": [begin, end]}, plus an optional
//	              "__metadata__" object of string → string
//	[8+N, EOF)    the data buffer; a tensor's bytes are data[begin:end],
//	              row-major, little-endian
//
// The parser is strict: a truncated or oversized header, an unknown dtype,
// offsets outside the data buffer, overlapping tensors, or a shape whose
// element count times the dtype size differs from end−begin is an error that
// names the file and the tensor. Files are memory-mapped where the platform
// allows it, and tensors are converted to float32 one at a time on demand, so
// loading a BF16 checkpoint never holds two full copies of the weights: the
// mapped pages belong to the page cache and can be dropped by the kernel.
//
// OpenDir opens a model folder holding either model.safetensors or a sharded
// model.safetensors.index.json. Write writes a file atomically (temporary
// file in the same directory, fsync, rename).
package safetensors

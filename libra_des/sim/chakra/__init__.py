"""MLCommons Chakra execution traces: the wire schema, export of a simulated training step
(one trace per rank), and replay of a trace's compute and communication nodes on a modelled
fabric. See ``et_def.proto`` beside this file for the schema as read and written."""

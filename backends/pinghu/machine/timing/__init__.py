"""The cycle model of Pinghu: how long a launch would take on the machine, and why.

:class:`~.model.TimingMachine` is a :class:`~..device.Machine` (the interpreter's event
hooks) that turns the instructions the interpreter executes, the addresses it computes
and the asynchronous events it runs into per-warp timelines (:mod:`.model`), memory
transactions, L2 hits and shared-memory bank conflicts (:mod:`.memory`), occupancy and
waves over the MPs (:mod:`.occupancy`), and one :class:`~.record.LaunchRecord` per
launch (:mod:`.compose`). Every number comes from the machine file through
:mod:`.params`. :mod:`.session` is where a profiling session registers itself.
docs/cycle-model.md says what is modelled and what is not."""

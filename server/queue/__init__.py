"""The queue plugged into the server: its call names bound to the drivers,
the takes and puts that must wait, the one deadline timer, the operator's
calls, the schedule calls and the task-change event streams.

The queue's rules stay in drivers/: this room adds the asyncio side and
never reads a driver's insides.

- `event_streams.py`: The streams of task-change events
- `events.py`: Task-change events for clients
- `operator_calls.py`: Server functions an operator needs beyond the queue module's API
  and queuebox.tasks (queue_calls.py)
- `queue_calls.py`: The queue, plugged into the server
- `route_calls.py`: What a shard offers a router (act_as, await_ready)
- `schedule_calls.py`: Schedules over the wire: make, list, pause, resume and delete them
- `timers.py`: The one timer of the server
- `waiting.py`: The asyncio side of a queue call that must wait
"""

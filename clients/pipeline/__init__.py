"""queuebox's PySpark data pipeline: read the WAL and snapshots, load tasks, report.

Owns: the `queuebox` Spark data source (read: WAL/snapshot records; write: enqueue
rows), the independent WAL/snapshot reader it is built on, the task-lifecycle job,
and the `queuebox pipeline ...` command line.

Must not touch: server/, drivers/ or storage/ (the file reader follows
storage/FORMAT.md on its own). PySpark, pandas and matplotlib are an optional extra
(`pip install queuebox[spark]`): nothing here imports them at package import time,
so `import clients.pipeline` stays cheap and the server never pulls them in.

Modules:
    walfile    -- frames, checksums and records of one WAL/snapshot file (no Spark)
    records    -- raw records -> flat rows with tube, task id, status, data as JSON
    sparkenv   -- building a SparkSession (local binding, shipping code), progress line
    source     -- the `queuebox` DataSource: reader and writer
    lifecycle  -- per-tube, per-bucket task counts and wait/run times
    report     -- Parquet, markdown summary and PNG charts of a lifecycle run
    cli        -- `queuebox pipeline load|report`
"""

-- 0001_init down: drops the queue's tables and every job in them.
DROP TABLE IF EXISTS {jobs};

DROP TABLE IF EXISTS {pauses};

DROP TABLE IF EXISTS {workers};

DROP TABLE IF EXISTS {metrics};

DROP TABLE IF EXISTS {meta};

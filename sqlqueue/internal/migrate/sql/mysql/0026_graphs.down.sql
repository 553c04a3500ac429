-- 0026_graphs down: the graphs are dropped.
DROP TABLE IF EXISTS {graph_edges};

DROP TABLE IF EXISTS {graph_nodes};

DROP TABLE IF EXISTS {graphs};

UPDATE {meta} SET value = '25' WHERE name = 'schema_version';

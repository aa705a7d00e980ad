"""cafe on a Ray cluster: ``cafe serve`` places replicas of a model server as Ray actors
(cafe.cluster.replicas) whose endpoints every client takes (cafe.cluster.endpoints), and
``cafe run --engine ray`` places an in-process adapter's replicas as actors behind a driver-side
proxy (cafe.cluster.pool). Planning, the cache, scoring, writes and resume stay in the driver:
Ray only places the work. Ray is the ``[ray]`` extra, imported only here and only when asked."""

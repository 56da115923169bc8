"""`rbl compile --target kubernetes`: the manifests that run a plan's shards as a Job on a cluster
(manifests.py) and the runner image: its build context, and the check of a plan against the
clients an image holds (image.py). The kubernetes backend creates exactly these manifests."""

-- What PyTorch had reserved when an allocation failed: the figure a record states, else the two parts an OOM
-- message prints ("Of the allocated memory X is allocated by PyTorch, and Y is reserved by PyTorch but
-- unallocated"), whose sum it is.
CREATE OR REPLACE MACRO oomlab_reserved_at_oom(reserved, allocated_by_pytorch, reserved_unallocated) AS
    coalesce(reserved, allocated_by_pytorch + reserved_unallocated);

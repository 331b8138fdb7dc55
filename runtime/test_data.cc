// TEMPORARY: being written (helper task).

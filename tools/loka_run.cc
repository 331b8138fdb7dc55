int main() { return 1; }  // TEMPORARY (helper task)

CMakeFiles/wspipe.dir/tools/wspipe.cpp.o: ../../tools/wspipe.cpp \
 ../../backends/emu/runtime/world.hpp \
 ../../core/pipeline.hpp

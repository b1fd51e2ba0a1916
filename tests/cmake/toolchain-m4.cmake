# tests/cmake/toolchain-m4.cmake - a Cortex-M4F bare-metal toolchain file of the kind firmware
# projects have (arm-none-eabi-gcc, newlib with semihosting), plus the two variables that make
# onnxcc_add_model compile models for the same chip.
set(CMAKE_SYSTEM_NAME Generic)
set(CMAKE_SYSTEM_PROCESSOR arm)
set(CMAKE_C_COMPILER arm-none-eabi-gcc)
set(CMAKE_TRY_COMPILE_TARGET_TYPE STATIC_LIBRARY)
set(CMAKE_C_FLAGS_INIT "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard -ffp-contract=off --specs=rdimon.specs --specs=nano.specs")
set(CMAKE_EXE_LINKER_FLAGS_INIT "-mcpu=cortex-m4 -mthumb -mfpu=fpv4-sp-d16 -mfloat-abi=hard")
set(ONNXCC_TARGET_TRIPLE thumbv7em-none-eabihf)
set(ONNXCC_CPU cortex-m4)
